//! The good documents and the schemas of the daemons' configuration files.

use serde_json::{Value, json};

use super::mutate::{Field, Kind};

/// Two peers' public keys (any valid keys: the peers need not exist).
pub const KEY_A: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
/// The second.
pub const KEY_B: &str = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=";

const fn f(path: &'static str, kind: Kind, required: bool) -> Field {
    Field {
        path,
        kind,
        required,
    }
}

/// A gateway configuration with every field set, two peers (one learns its endpoint) and an
/// endpoint mapping (for milan and a peer not configured).
pub fn gateway(namespace: &str, key_file: &str) -> Value {
    json!({
        "namespace": namespace,
        "listenPort": 51840,
        "privateKeyFile": key_file,
        "mtu": 1420,
        "keepalive": 10,
        "localPodCIDR": "10.200.0.0/16",
        "linkCIDR": "169.254.100.0/30",
        "hostRoutes": true,
        "localExternalCIDR": "10.70.0.0/16",
        "peers": [
            {
                "id": "milan",
                "publicKey": KEY_A,
                "endpoint": "198.18.0.2:51840",
                "keepalive": 5,
                "remotePodCIDR": "10.71.0.0/16",
                "remoteExternalCIDR": "10.72.0.0/16",
                "localPodCIDRAtPeer": "10.50.0.0/16",
                "localExternalCIDRAtPeer": "10.51.0.0/16"
            },
            {
                "id": "turin",
                "publicKey": KEY_B,
                "remotePodCIDR": "10.73.0.0/16",
                "localPodCIDRAtPeer": "10.200.0.0/16"
            }
        ],
        "endpoints": [
            {"ip": "172.18.0.9", "externalIP": "10.70.0.1", "peers": ["milan", "zurich"]}
        ]
    })
}

/// The gateway's fields.
pub const GATEWAY: &[Field] = &[
    f("namespace", Kind::NetnsName, false),
    f("listenPort", Kind::Port, false),
    f("privateKeyFile", Kind::Path, false),
    f("mtu", Kind::Mtu, false),
    f("keepalive", Kind::Keepalive, false),
    f("localPodCIDR", Kind::Range, true),
    f("linkCIDR", Kind::Range, false),
    f("hostRoutes", Kind::Bool, false),
    f("peers[*].id", Kind::ClusterId, true),
    f("peers[*].publicKey", Kind::Key, true),
    f("peers[*].endpoint", Kind::Endpoint, false),
    f("peers[*].keepalive", Kind::Keepalive, false),
    f("peers[*].remotePodCIDR", Kind::Range, true),
    f("peers[*].remoteExternalCIDR", Kind::Range, false),
    f("peers[*].localPodCIDRAtPeer", Kind::Range, true),
    f("localExternalCIDR", Kind::Range, false),
    f("peers[*].localExternalCIDRAtPeer", Kind::Range, false),
    f("endpoints[*].ip", Kind::NodeAddress, true),
    f("endpoints[*].externalIP", Kind::NodeAddress, true),
    f("endpoints[*].peers[*]", Kind::ClusterId, false),
];

/// An overlay agent's configuration on n1 of three nodes, with every field set.
pub fn overlay() -> Value {
    json!({
        "node": "n1",
        "gateway": "n0",
        "nodes": [
            {"name": "n0", "address": "172.18.0.1", "podCIDR": "10.200.0.0/24"},
            {"name": "n1", "address": "172.18.0.2", "podCIDR": "10.200.1.0/24"},
            {"name": "n2", "address": "172.18.0.3", "podCIDR": "10.200.2.0/24"}
        ],
        "remoteCIDRs": ["10.71.0.0/16", "10.72.0.0/16"],
        "device": "liqo.vxlan",
        "vni": 18952,
        "port": 4879,
        "mtu": 1450,
        "underlayInterface": "eth0"
    })
}

/// The overlay agent's fields.
pub const OVERLAY: &[Field] = &[
    f("node", Kind::NodeRef, true),
    f("gateway", Kind::NodeRef, true),
    f("nodes[*].name", Kind::NodeName, true),
    f("nodes[*].address", Kind::NodeAddress, true),
    f("nodes[*].podCIDR", Kind::Range, true),
    f("remoteCIDRs[*]", Kind::Range, false),
    f("device", Kind::IfName, false),
    f("vni", Kind::Vni, false),
    f("port", Kind::Port, false),
    f("mtu", Kind::Mtu, false),
    f("underlayInterface", Kind::IfName, false),
];

/// `liqo-ipam serve`'s configuration file, with every reloadable and fixed field set.
pub fn ipam(state: &str) -> Value {
    json!({
        "listen": "127.0.0.1:6000",
        "metricsListen": "127.0.0.1:9106",
        "state": state,
        "podCidr": "10.200.0.0/16",
        "serviceCidr": "10.96.0.0/12",
        "externalCidr": "10.70.0.0/16",
        "pools": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
        "additionalPools": ["100.64.0.0/10"],
        "reservedSubnets": ["10.201.0.0/16"]
    })
}

/// `liqo-ipam serve`'s fields.
pub const IPAM: &[Field] = &[
    f("listen", Kind::Listen, false),
    f("metricsListen", Kind::Listen, false),
    f("state", Kind::Path, false),
    f("podCidr", Kind::Range, true),
    f("serviceCidr", Kind::Range, false),
    f("externalCidr", Kind::Range, false),
    f("pools[*]", Kind::Range, false),
    f("additionalPools[*]", Kind::Range, false),
    f("reservedSubnets[*]", Kind::Range, false),
];

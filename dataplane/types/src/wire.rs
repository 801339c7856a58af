//! The entries the control plane (or the lab) writes into the daemons' configuration files: a
//! gateway's peers and an overlay agent's nodes. The daemons decode them with the same types,
//! so a value is validated once, where it is read, and named by its field.

use std::net::{Ipv4Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::{Cidr, ClusterId, PublicKey};

/// One peer of a gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayPeer {
    /// The peer's cluster ID.
    pub id: ClusterId,
    /// Its WireGuard public key.
    pub public_key: PublicKey,
    /// `ip:port`; without it the gateway waits to be called and learns it from the peer's
    /// first authenticated packet (a peer behind NAT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<SocketAddr>,
    /// Persistent keepalive for this peer, seconds (else the gateway's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<u16>,
    /// The peer's pods as they appear here (the local IPAM's decision).
    #[serde(rename = "remotePodCIDR")]
    pub remote_pod_cidr: Cidr,
    /// The peer's external CIDR as it appears here.
    #[serde(
        rename = "remoteExternalCIDR",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub remote_external_cidr: Option<Cidr>,
    /// Our pods as the peer sees them (the peer's IPAM's decision).
    #[serde(rename = "localPodCIDRAtPeer")]
    pub local_pod_cidr_at_peer: Cidr,
    /// Our external CIDR as the peer sees it (the peer's IPAM's decision): the peer reaches our
    /// mapped endpoints ([`EndpointMapping`]) at these addresses.
    #[serde(
        rename = "localExternalCIDRAtPeer",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub local_external_cidr_at_peer: Option<Cidr>,
}

impl GatewayPeer {
    /// The ranges routed to this peer (its allowed IPs).
    pub fn allowed(&self) -> Vec<Cidr> {
        std::iter::once(self.remote_pod_cidr)
            .chain(self.remote_external_cidr)
            .collect()
    }
}

/// A local address exposed to some peers through our external CIDR (an IPAM `MapIp` with
/// direction `ENDPOINT`, listed by its `List` as an `Endpoint`): a node, a host-network pod, the
/// API server. A listed peer reaches it at `external_ip` moved into its view of our external
/// CIDR ([`GatewayPeer::local_external_cidr_at_peer`]); the gateway translates that address
/// back to `ip`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointMapping {
    /// The real address.
    pub ip: Ipv4Addr,
    /// Its address in our external CIDR.
    #[serde(rename = "externalIP")]
    pub external_ip: Ipv4Addr,
    /// The peers allowed to reach it.
    #[serde(default)]
    pub peers: Vec<ClusterId>,
}

/// One node of a cluster, as the overlay agents know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverlayNode {
    /// The node's name.
    pub name: String,
    /// Its address on the cluster network (the VXLAN underlay).
    pub address: Ipv4Addr,
    /// Its pod CIDR.
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Cidr,
}

/// The gateway's host-side link (its veth into the node's namespace): where traffic from
/// remote clusters comes out of the gateway, which the overlay's gateway-node rule matches.
pub const GATEWAY_HOST_LINK: &str = "liqo.host";

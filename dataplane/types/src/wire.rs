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
}

impl GatewayPeer {
    /// The ranges routed to this peer (its allowed IPs).
    pub fn allowed(&self) -> Vec<Cidr> {
        std::iter::once(self.remote_pod_cidr)
            .chain(self.remote_external_cidr)
            .collect()
    }
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

//! [`PeerView`]: how a cluster sees one peer, and how that peer sees it. Each side's IPAM decides
//! where the other's ranges appear locally (the same prefix when free, else a remapped one); the
//! two decisions together are all the gateway's prefix NAT needs. [`PeerView::of`] is the one
//! place a view is made of the two decisions ([`Ranges`]), for the lab and the network manager
//! alike; [`IpamPeer`] is what an IPAM holds for a peer.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::Cidr;

/// A pod CIDR and an external CIDR: what a cluster announces, or where they appear elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ranges {
    /// Pods.
    pub pods: Cidr,
    /// External CIDR.
    pub external: Cidr,
}

/// What an IPAM holds for one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpamPeer {
    /// What the peer announced.
    pub announced: Ranges,
    /// Where its ranges appear here.
    pub seen_here: Ranges,
    /// Where our ranges appear at the peer (its decision), once recorded.
    pub seen_there: Option<Ranges>,
}

/// One cluster's view of a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerView {
    /// The peer's pods, as they appear here.
    pub remote_pods: Cidr,
    /// The peer's external CIDR, as it appears here.
    pub remote_external: Cidr,
    /// Our pods, as the peer sees them.
    pub local_pods_at_peer: Cidr,
    /// Our external CIDR, as the peer sees it.
    pub local_external_at_peer: Cidr,
}

impl PeerView {
    /// The view of a side that shows the peer at `seen_here` (its own IPAM's decision) and is
    /// shown at `seen_there` (the peer's decision).
    pub fn of(seen_here: Ranges, seen_there: Ranges) -> PeerView {
        PeerView {
            remote_pods: seen_here.pods,
            remote_external: seen_here.external,
            local_pods_at_peer: seen_there.pods,
            local_external_at_peer: seen_there.external,
        }
    }

    /// The same peering seen from the peer.
    pub fn mirrored(&self) -> PeerView {
        PeerView {
            remote_pods: self.local_pods_at_peer,
            remote_external: self.local_external_at_peer,
            local_pods_at_peer: self.remote_pods,
            local_external_at_peer: self.remote_external,
        }
    }

    /// The ranges that lead to the peer here (its pods and its external CIDR).
    pub fn remote_ranges(&self) -> [Cidr; 2] {
        [self.remote_pods, self.remote_external]
    }

    /// Where a pod of the peer (`ip`, an address of the peer's own `pod_cidr`) is reached here.
    pub fn remote_pod(&self, peer_pod_cidr: &Cidr, ip: Ipv4Addr) -> Ipv4Addr {
        peer_pod_cidr.translate(ip, &self.remote_pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrored_twice_is_the_same_and_pods_translate() {
        let c = |s: &str| s.parse::<Cidr>().unwrap();
        let v = PeerView {
            remote_pods: c("10.71.0.0/16"),
            remote_external: c("10.72.0.0/16"),
            local_pods_at_peer: c("10.50.0.0/16"),
            local_external_at_peer: c("10.51.0.0/16"),
        };
        assert_eq!(v.mirrored().mirrored(), v);
        assert_eq!(v.mirrored().remote_pods, c("10.50.0.0/16"));
        assert_eq!(
            v.remote_pod(&c("10.200.0.0/16"), "10.200.1.2".parse().unwrap())
                .to_string(),
            "10.71.1.2"
        );
    }
}

//! The entries of the endpoint maps: what the gateway translates through our external CIDR.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net};

use crate::config::Config;

/// An entry of a mark prefix map: `(mark, prefix) : translated prefix`.
pub(super) type MarkedEntry = ((u32, IpNet), IpNet);

/// The endpoint maps' entries, each in order and once.
#[derive(Debug, Default)]
pub(super) struct Endpoints {
    /// `dnat_endpoint`: `(peer range's mark, endpoint as that peer sees it) : real address`.
    pub(super) dnat: Vec<MarkedEntry>,
    /// `snat_endpoint`: `(peer range's mark, real address) : endpoint as that peer sees it`.
    pub(super) snat: Vec<MarkedEntry>,
    /// `snat_host`: `peer range's mark : first address of our external CIDR as that peer sees
    /// it` (the IPAM hands out its addresses from the second on, so it is no endpoint's).
    pub(super) hosts: Vec<(u32, IpAddr)>,
    /// The real addresses peers may reach (`endpoint_ips`).
    pub(super) reached: Vec<IpNet>,
}

/// The entries of `c`: for each peer configured with a view of our external CIDR, each of its
/// ranges, the shared source address; for each mapping, each peer it lists that is so
/// configured, each of that peer's ranges, both translations.
pub(super) fn of(c: &Config) -> Endpoints {
    let mut out = Endpoints::default();
    let Some(external) = c.local_external_cidr else {
        return out;
    };
    let host = |ip: u32| IpNet::V4(Ipv4Net::from(std::net::Ipv4Addr::from(ip)));
    let marks = |p: &crate::config::Peer| {
        p.allowed()
            .into_iter()
            .map(|r| u32::from(r.network()))
            .collect::<Vec<_>>()
    };
    for p in c.peers.values() {
        if let Some(at_peer) = p.local_external_cidr_at_peer {
            for mark in marks(p) {
                out.hosts.push((mark, IpAddr::V4(at_peer.network())));
            }
        }
    }
    for e in &c.endpoints {
        let real = host(u32::from(e.ip));
        // The same host bits in each peer's view (both have one length: validated).
        let bits = u32::from(e.external_ip) & !u32::from(external.netmask());
        for p in e.peers.iter().filter_map(|id| c.peers.get(id)) {
            let Some(at_peer) = p.local_external_cidr_at_peer else {
                continue;
            };
            let seen = host(u32::from(at_peer.network()) | bits);
            for mark in marks(p) {
                out.dnat.push(((mark, seen), real));
                out.snat.push(((mark, real), seen));
            }
            out.reached.push(real);
        }
    }
    // In address order, as the kernel keeps them: a change of a few is then found in one pass.
    out.hosts.sort_unstable();
    out.dnat.sort_unstable();
    out.snat.sort_unstable();
    out.reached.sort_unstable();
    out.reached.dedup();
    out
}

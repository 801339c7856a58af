//! Checks of the endpoint mappings: `localExternalCIDR`, each peer's
//! `localExternalCIDRAtPeer` and the `endpoints` list (what the IPAM's `List` reports).
//!
//! Decisions, each refused with the field's path:
//! - `localExternalCIDRAtPeer` needs `localExternalCIDR` (the translation has no source range
//!   otherwise), has its length, and does not overlap `localPodCIDRAtPeer` (both are ranges of
//!   the peer's address space: a destination in both would be ambiguous);
//! - an `externalIP` lies in `localExternalCIDR` (without it the mappings are inert: no peer has
//!   a view of our external CIDR then, and a writer that learns the mappings before the CIDR,
//!   say while its last peer goes, is not refused whole); an `ip` lies in none of
//!   the gateway's ranges (our pods are reached through `localPodCIDRAtPeer`, an external address
//!   is not a real one, and the gateway does not forward a peer's packets to another peer) and is
//!   an address a node could have (unicast, not link-local or reserved); an `externalIP` is
//!   neither the first address of the CIDR (the shared source of our other traffic to peers) nor
//!   its last; real and external addresses are each mapped once; a mapping lists a peer once;
//! - a mapping may list a peer the file does not configure: it is kept and takes effect when the
//!   peer is configured (the IPAM keeps mappings while peers come and go, and refusing them would
//!   stop every other peer's update), and a mapping that lists no peer reaches no one.

use std::{collections::BTreeSet, net::Ipv4Addr};

use ipnet::Ipv4Net;
use liqo_types::{
    Cidr, EndpointMapping,
    addr::unusable_node_address,
    field::{FieldError as ConfigError, bad},
};

use super::ranges::{overlaps, range};

/// A validated endpoint mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The real address.
    pub ip: Ipv4Addr,
    /// Its address in our external CIDR.
    pub external_ip: Ipv4Addr,
    /// The peers allowed to reach it (some may not be configured).
    pub peers: BTreeSet<String>,
}

/// A peer's `localExternalCIDRAtPeer` (`f` names the peer's fields), checked against our
/// external CIDR and the peer's view of our pods.
pub(super) fn external_at_peer(
    f: &dyn Fn(&str) -> String,
    c: Cidr,
    external: Option<Ipv4Net>,
    pods_at_peer: Ipv4Net,
) -> Result<Ipv4Net, ConfigError> {
    let name = f("localExternalCIDRAtPeer");
    let at_peer = range(&name, c)?;
    let Some(external) = external else {
        return Err(bad(
            name,
            format!("{at_peer} is given but localExternalCIDR is not"),
        ));
    };
    if at_peer.prefix_len() != external.prefix_len() {
        return Err(bad(
            name,
            format!("{at_peer} must have the length of localExternalCIDR {external}"),
        ));
    }
    if overlaps(&at_peer, &pods_at_peer) {
        return Err(bad(
            name,
            format!(
                "{at_peer} overlaps {} {pods_at_peer}",
                f("localPodCIDRAtPeer")
            ),
        ));
    }
    Ok(at_peer)
}

/// The mappings of `file`, checked; `taken` are the gateway's ranges in our address space, by
/// field path.
pub(super) fn check(
    file: &[EndpointMapping],
    external: Option<Ipv4Net>,
    taken: &[(String, Ipv4Net)],
) -> Result<Vec<Endpoint>, ConfigError> {
    let mut out: Vec<Endpoint> = Vec::with_capacity(file.len());
    for (i, e) in file.iter().enumerate() {
        let f = |name: &str| format!("endpoints[{i}].{name}");
        if let Some(why) = unusable_node_address(e.ip) {
            return Err(bad(f("ip"), format!("{} is {why}", e.ip)));
        }
        if let Some((who, t)) = taken.iter().find(|(_, t)| t.contains(&e.ip)) {
            return Err(bad(f("ip"), format!("{} is in {who} {t}", e.ip)));
        }
        // Without our external CIDR no peer has a view of it: the mapping is inert (kept, so
        // that a writer that knows the mappings before the CIDR is not refused whole).
        if let Some(external) = external {
            if !external.contains(&e.external_ip) {
                return Err(bad(
                    f("externalIP"),
                    format!("{} not in localExternalCIDR {external}", e.external_ip),
                ));
            }
            if e.external_ip == external.network() || e.external_ip == external.broadcast() {
                return Err(bad(
                    f("externalIP"),
                    format!(
                        "{} is the first or last address of localExternalCIDR {external} (the first \
                         is the source of the cluster's other traffic to peers)",
                        e.external_ip
                    ),
                ));
            }
        }
        if let Some(j) = out.iter().position(|o| o.ip == e.ip) {
            return Err(bad(
                f("ip"),
                format!("{} is mapped already by endpoints[{j}]", e.ip),
            ));
        }
        if let Some(j) = out.iter().position(|o| o.external_ip == e.external_ip) {
            return Err(bad(
                f("externalIP"),
                format!("{} is taken already by endpoints[{j}]", e.external_ip),
            ));
        }
        let mut peers = BTreeSet::new();
        for (j, p) in e.peers.iter().enumerate() {
            if !peers.insert(p.to_string()) {
                return Err(bad(
                    format!("endpoints[{i}].peers[{j}]"),
                    format!("duplicate peer {:?}", p.as_str()),
                ));
            }
        }
        out.push(Endpoint {
            ip: e.ip,
            external_ip: e.external_ip,
            peers,
        });
    }
    Ok(out)
}

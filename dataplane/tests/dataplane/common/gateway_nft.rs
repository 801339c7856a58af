//! The translation part of the gateway's NAT (`gateway::plan::nat`, without its filters): a
//! mark map of peer ranges and the two mark prefix maps over our pods (10.200.0.0/16), with
//! the two NAT rules.

use dataplane::nft::{
    AddrType, BaseChain, Chain, ChainKind, Expr, Family, Field, Hook, Ident, MarkMap,
    MarkPrefixMap, Policy, Rule, Ruleset,
};
use ipnet::IpNet;

/// Our pods, as the gateway's tests place them.
pub const OURS: &str = "10.200.0.0/16";

pub fn id(s: &str) -> Ident {
    s.parse().unwrap()
}

pub fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// A base chain with policy accept.
pub fn chain(name: &str, kind: ChainKind, hook: Hook, priority: i32, rules: Vec<Rule>) -> Chain {
    Chain {
        name: id(name),
        base: Some(BaseChain {
            kind,
            hook,
            priority,
            policy: Policy::Accept,
        }),
        rules,
    }
}

/// The mark of a peer range: its first address (as the gateway's).
pub fn mark(remote: &str) -> u32 {
    match net(remote) {
        IpNet::V4(n) => u32::from(n.network()),
        IpNet::V6(_) => unreachable!("IPv4 only"),
    }
}

/// Table `table` translating for `peers` (`(peer range here, our pods as that peer sees
/// them)`) on `tun0`: chains `pre` (ingress DNAT) and `post` (egress SNAT).
pub fn gateway_like(table: &str, peers: &[(&str, &str)]) -> Ruleset {
    let ours = net(OURS);
    let mut rs = Ruleset::new(Family::Ip, id(table));
    rs.mark_maps.push(MarkMap {
        name: id("peer_ranges"),
        addr: AddrType::V4,
        entries: peers.iter().map(|(r, _)| (net(r), mark(r))).collect(),
    });
    let map = |name: &str, entries| MarkPrefixMap {
        name: id(name),
        addr: AddrType::V4,
        prefix_len: 16,
        entries,
    };
    rs.mark_prefix_maps.push(map(
        "snat_pod",
        (peers.iter())
            .map(|(r, at_peer)| ((mark(r), ours), net(at_peer)))
            .collect(),
    ));
    rs.mark_prefix_maps.push(map(
        "dnat_pod",
        (peers.iter())
            .map(|(r, at_peer)| ((mark(r), net(at_peer)), ours))
            .collect(),
    ));
    let tun = || "tun0".parse().unwrap();
    rs.chains.push(chain(
        "pre",
        ChainKind::Nat,
        Hook::Prerouting,
        -100,
        vec![Rule::new(vec![
            Expr::Iif(tun()),
            Expr::SetMarkMap(Field::Saddr, id("peer_ranges")),
            Expr::DnatPrefixMarkMap(id("dnat_pod")),
        ])],
    ));
    rs.chains.push(chain(
        "post",
        ChainKind::Nat,
        Hook::Postrouting,
        100,
        vec![Rule::new(vec![
            Expr::Oif(tun()),
            Expr::SetMarkMap(Field::Daddr, id("peer_ranges")),
            Expr::SnatPrefixMarkMap(id("snat_pod")),
        ])],
    ));
    rs
}

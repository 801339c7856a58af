//! What the kernel should hold for a [`Config`], as plain values: the NAT table and the routes
//! and rules in the gateway namespace and in the host namespace.
//!
//! ## Where addresses are translated
//! Each peer owns unique ranges *in our address space* (the IPAM guarantees it): its pods (and
//! external CIDR) as they appear here. Packets travel the tunnel with the source in the
//! receiver's view of the sender and the destination in the sender's view of the receiver, so
//! both ends route and check allowed IPs on ranges unique in their own space:
//! - egress (to the tunnel): the destination picks the peer (routing and WireGuard allowed IPs),
//!   and the source, one of our pods, becomes our pod as that peer sees it;
//! - ingress (from the tunnel): the source is the peer's range here (allowed IPs check) and the
//!   destination is our pod as that peer sees it, which becomes our real pod.
//!
//! Both translations depend on two addresses: the peer's range (picked by one) and a range of
//! our pods (the other). One rule each, whatever the number of peers, in two lookups:
//! `peer_ranges` maps each peer range to a mark (its first address: ranges are disjoint, so
//! every range has its own), then `meta mark . (ip saddr & MASK)` (egress) or
//! `meta mark . (ip daddr & MASK)` (ingress) is looked up in `snat_pod` or `dnat_pod`, whose
//! keys are exact (our pods as any peer sees them have the length of our pod CIDR, `MASK`):
//! - egress: `meta mark set ip daddr map @peer_ranges snat ip prefix to meta mark . (ip saddr &
//!   MASK) map @snat_pod`, entries `range . our pods : our pods at the peer`;
//! - ingress: `meta mark set ip saddr map @peer_ranges dnat ip prefix to meta mark . (ip daddr &
//!   MASK) map @dnat_pod`, entries `range . our pods at the peer : our pods`.
//!
//! A packet matches exactly when it matched the pair `(peer range, our range)` of the
//! translation, and a peer's entries are its own: adding or removing one costs the same at a
//! thousand peers as at one (an interval map of pairs, the kernel's pipapo set, scans its
//! entries on every deletion). Only the first packet of a connection passes the NAT chains; it
//! leaves them with the mark set (nothing in the gateway namespace looks at marks, and the veth
//! to the host clears them). Replies are translated back by conntrack.
//!
//! A peer reaches our pods only as it sees them: the first packet of a connection from the
//! tunnel that the ingress translation did not match is dropped in the NAT chain, and a packet
//! conntrack cannot place (so never translated) is dropped in the filter, both ways (conntrack
//! is liberal with out-of-window TCP, so that is only what it cannot track at all). Without both, a peer
//! that sees our pods remapped could still reach them at their real addresses.
//!
//! ## Endpoints: our external CIDR
//! A local address that is not a pod (a node, a host-network pod, the API server) is exposed to
//! chosen peers at an address of our external CIDR (the IPAM's endpoint mapping, see
//! [`crate::config::Endpoint`]); a peer reaches it at that address moved into its view of our
//! external CIDR (`localExternalCIDRAtPeer`). The translations use exact keys again (`/32`s),
//! one entry per range of each peer a mapping lists (none for a peer it does not list):
//! - ingress, after the pods' rule: `meta mark set ip saddr map @peer_ranges dnat ip prefix to
//!   meta mark . ip daddr map @dnat_endpoint`, entries `range . endpoint as the peer sees it :
//!   real address`; what no entry matches falls to the drop like any untranslated new
//!   connection;
//! - egress, after the pods' rule: a mapped endpoint that opens a connection to a peer it is
//!   mapped for appears there at its own address (`snat_endpoint`, the same entries reversed),
//!   and any other local source (a node, a host-network pod) at the first address of our
//!   external CIDR as that peer sees it (`snat ip to meta mark map @snat_host`, one entry per
//!   peer range; the IPAM never hands that address out). Without a view of our external CIDR a
//!   peer gets no such entry: the first packet of a connection to it from what is not a pod is
//!   dropped (and counted) at the end of the NAT chain, as on the way in, so our real internal
//!   addresses never leave through the tunnel.
//!
//! Adding or removing a mapping (or a peer it lists) changes elements only, like a peer. The
//! filter lets peers open connections to the real addresses of `endpoint_ips` besides our pods
//! (only what the translation led there: a new connection straight to a real address was
//! dropped already), and passes the replies of connections we opened; [`gateway_routes`] sends
//! everything that is not a peer's back to the host once there is an external CIDR. Replies
//! are translated back by conntrack. Our own pods reach a peer's external CIDR as they reach its
//! pods: the peer's external range has its mark and its `snat_pod` entries, and the peer
//! translates it.

use dataplane::{
    nft::{
        AddrType, BaseChain, Chain, ChainKind, CtState, Expr, Family, Field, Hook, Ident,
        MarkAddrMap, MarkMap, MarkPrefixMap, Policy, Rule, Ruleset, Set,
    },
    route::RouteSpec,
    rule::RuleSpec,
};
use ipnet::IpNet;

use crate::config::Config;

/// The nftables table the gateway owns in its namespace.
pub const NAT_TABLE: &str = "liqo_gateway";

/// Routing table for the peers' ranges in the host namespace.
pub const HOST_TABLE: u32 = 18951;

/// Priority of the host rule that consults [`HOST_TABLE`]: after the overlay's rule
/// (`overlay_api` `TABLE`, 18952), so that on a node that is no longer the gateway node the
/// overlay's routes to the peers' ranges (over VXLAN to the new gateway node) win over a rule a
/// killed gateway left behind (a SIGKILL undoes nothing; its container comes back only after a
/// restart back-off, which took up to 50 s of lost traffic from that node's pods in the lab).
/// On the gateway node the overlay's rule matches only what comes out of the gateway
/// namespace, so the node's own traffic still reaches this one.
pub const HOST_RULE_PRIORITY: u32 = 18953;

/// Where older gateways put that rule (before the overlay's): emptied on start and on removal.
pub const OLD_HOST_RULE_PRIORITY: u32 = HOST_TABLE;

/// Routing table (and rule priority) of the gateway namespace; the gateway owns it entirely, so
/// reconciling it never touches the kernel's own routes in `main`.
pub const GATEWAY_TABLE: u32 = 18952;

fn id(s: &str) -> Ident {
    s.parse().expect("constant nft names are valid")
}

/// The NAT and MSS-clamping table of the gateway namespace.
pub fn nat(c: &Config) -> Ruleset {
    let mut rs = Ruleset::new(Family::Ip, id(NAT_TABLE));
    let local = IpNet::V4(c.local_pod_cidr);
    let (mut ranges, mut snat, mut dnat) = (Vec::new(), Vec::new(), Vec::new());
    for p in c.peers.values() {
        let at_peer = IpNet::V4(p.local_pod_cidr_at_peer);
        for remote in p.allowed() {
            let mark = u32::from(remote.network());
            ranges.push((IpNet::V4(remote), mark));
            snat.push(((mark, local), at_peer));
            dnat.push(((mark, at_peer), local));
        }
    }
    let ep = endpoints::of(c);
    // In address order, as the kernel keeps them: a change of a few is then found in one pass.
    ranges.sort_unstable();
    snat.sort_unstable();
    dnat.sort_unstable();
    rs.mark_maps.push(MarkMap {
        name: id("peer_ranges"),
        addr: AddrType::V4,
        entries: ranges,
    });
    // Our pods as a peer sees them have the length of our pod CIDR (the configuration checks).
    let pod_map = |name, entries| MarkPrefixMap {
        name: id(name),
        addr: AddrType::V4,
        prefix_len: c.local_pod_cidr.prefix_len(),
        entries,
    };
    rs.mark_prefix_maps.push(pod_map("snat_pod", snat));
    rs.mark_prefix_maps.push(pod_map("dnat_pod", dnat));
    let exact = |name, entries| MarkPrefixMap {
        name: id(name),
        addr: AddrType::V4,
        prefix_len: 32,
        entries,
    };
    rs.mark_prefix_maps.push(exact("dnat_endpoint", ep.dnat));
    rs.mark_prefix_maps.push(exact("snat_endpoint", ep.snat));
    rs.mark_addr_maps.push(MarkAddrMap {
        name: id("snat_host"),
        addr: AddrType::V4,
        entries: ep.hosts,
    });
    let base = |kind, hook, priority| {
        Some(BaseChain {
            kind,
            hook,
            priority,
            policy: Policy::Accept,
        })
    };
    let tun = || c.tun.clone();
    rs.chains.push(Chain {
        name: id("prerouting"),
        base: base(ChainKind::Nat, Hook::Prerouting, -100),
        rules: vec![
            Rule::new(vec![
                Expr::Iif(tun()),
                Expr::SetMarkMap(Field::Saddr, id("peer_ranges")),
                Expr::DnatPrefixMarkMap(id("dnat_pod")),
            ])
            .comment("our pods as the peer sees them -> our pods"),
            Rule::new(vec![
                Expr::Iif(tun()),
                Expr::SetMarkMap(Field::Saddr, id("peer_ranges")),
                Expr::DnatPrefixMarkMap(id("dnat_endpoint")),
            ])
            .comment("our endpoints as the peer sees them -> their real addresses"),
            // The translation ends the chain; what is left was sent to an address that is not
            // our pods as that peer sees them (say our pods' real addresses, behind a remap).
            Rule::new(vec![Expr::Iif(tun()), Expr::Counter, Expr::Drop])
                .comment("new connections from peers go to our pods as they see them"),
        ],
    });
    rs.chains.push(Chain {
        name: id("postrouting"),
        base: base(ChainKind::Nat, Hook::Postrouting, 100),
        rules: vec![
            Rule::new(vec![
                Expr::Oif(tun()),
                Expr::SetMarkMap(Field::Daddr, id("peer_ranges")),
                Expr::SnatPrefixMarkMap(id("snat_pod")),
            ])
            .comment("our pods -> our pods as the destination peer sees them"),
            Rule::new(vec![
                Expr::Oif(tun()),
                Expr::SetMarkMap(Field::Daddr, id("peer_ranges")),
                Expr::SnatPrefixMarkMap(id("snat_endpoint")),
            ])
            .comment("our endpoints -> their addresses as the destination peer sees them"),
            Rule::new(vec![
                Expr::Oif(tun()),
                Expr::SetMarkMap(Field::Daddr, id("peer_ranges")),
                Expr::SnatMarkMap(id("snat_host")),
            ])
            .comment("other local sources -> our external CIDR as the destination peer sees it"),
            // The translation ends the chain; what is left is a source that is not a pod, to a
            // peer without a view of our external CIDR: it would show our real addresses.
            Rule::new(vec![Expr::Oif(tun()), Expr::Counter, Expr::Drop])
                .comment("new connections to peers leave translated"),
        ],
    });
    // A peer may reach our pods and nothing else: not this namespace, not the host behind it,
    // not another peer through us. Checked after the destination translation.
    rs.sets.push(Set {
        name: id("local_pods"),
        addr: AddrType::V4,
        prefixes: vec![local],
    });
    rs.sets.push(Set {
        name: id("endpoint_ips"),
        addr: AddrType::V4,
        prefixes: ep.reached,
    });
    let filter = |hook, priority| {
        Some(BaseChain {
            kind: ChainKind::Filter,
            hook,
            priority,
            policy: Policy::Accept,
        })
    };
    rs.chains.push(Chain {
        name: id("from_peers"),
        base: filter(Hook::Forward, 0),
        rules: vec![
            Rule::new(vec![
                Expr::Iif(tun()),
                Expr::Oif(tun()),
                Expr::Counter,
                Expr::Drop,
            ])
            .comment("no transit between peers"),
            // Conntrack could not place it, so no translation ran (the rule above checks only
            // the first packet of a connection): our pods' real addresses must not pass.
            Rule::new(vec![
                Expr::Iif(tun()),
                Expr::CtState(CtState::Invalid),
                Expr::Counter,
                Expr::Drop,
            ])
            .comment("untranslatable packets from peers"),
            // Nor may ours leave untranslated (with our pods' real addresses).
            Rule::new(vec![
                Expr::Oif(tun()),
                Expr::CtState(CtState::Invalid),
                Expr::Counter,
                Expr::Drop,
            ])
            .comment("untranslatable packets to peers"),
            Rule::new(vec![
                Expr::Iif(tun()),
                Expr::CtState(CtState::New),
                Expr::NotInSet(Field::Daddr, id("local_pods")),
                Expr::NotInSet(Field::Daddr, id("endpoint_ips")),
                Expr::Counter,
                Expr::Drop,
            ])
            .comment("peers reach our pods and mapped endpoints only"),
        ],
    });
    rs.chains.push(Chain {
        name: id("to_gateway"),
        base: filter(Hook::Input, 0),
        rules: vec![
            Rule::new(vec![Expr::Iif(tun()), Expr::Counter, Expr::Drop])
                .comment("nothing listens for peers here"),
        ],
    });
    rs.chains.push(Chain {
        name: id("mss"),
        base: base(ChainKind::Filter, Hook::Forward, -150),
        rules: vec![
            Rule::new(vec![Expr::Oif(tun()), Expr::ClampMssToPmtu]),
            Rule::new(vec![Expr::Iif(tun()), Expr::ClampMssToPmtu]),
        ],
    });
    rs
}

/// Routes of [`GATEWAY_TABLE`] in the gateway namespace: each peer's ranges into the tunnel, our
/// pods back to the host, and with an external CIDR everything else back to the host too.
pub fn gateway_routes(c: &Config) -> Vec<RouteSpec> {
    let mut routes: Vec<RouteSpec> = c
        .peers
        .values()
        .flat_map(|p| p.allowed())
        .map(|n| RouteSpec {
            dev: Some(c.tun.clone()),
            table: GATEWAY_TABLE,
            ..RouteSpec::to(IpNet::V4(n))
        })
        .collect();
    // With an external CIDR, the real addresses behind it (mapped endpoints, and the local
    // sources translated into it: nodes, host-network pods) are anywhere on the cluster's
    // network: everything that is not a peer's goes back to the host.
    let back = IpNet::V4(c.local_pod_cidr);
    let default = c
        .local_external_cidr
        .map(|_| "0.0.0.0/0".parse().expect("literal"));
    routes.extend(std::iter::once(back).chain(default).map(|to| RouteSpec {
        via: Some(c.host_addr().addr().into()),
        dev: Some(c.gateway_link.clone()),
        table: GATEWAY_TABLE,
        ..RouteSpec::to(to)
    }));
    routes
}

/// The rule of the gateway namespace that consults [`GATEWAY_TABLE`] first.
pub fn gateway_rules() -> Vec<RuleSpec> {
    vec![RuleSpec {
        priority: GATEWAY_TABLE,
        from: None,
        to: None,
        iif: None,
        fwmark: None,
        table: GATEWAY_TABLE,
        v6: false,
    }]
}

/// Routes of [`HOST_TABLE`] in the host namespace: each peer's ranges into the gateway namespace,
/// with the tunnel MTU on the route, so that the host itself refuses a larger DF packet with
/// "fragmentation needed" from an address its senders can route to (a pod's bridge address, the
/// node's address) rather than the gateway namespace answering from its link address.
pub fn host_routes(c: &Config) -> Vec<RouteSpec> {
    if !c.host_routes {
        return Vec::new();
    }
    c.peers
        .values()
        .flat_map(|p| p.allowed())
        .map(|n| RouteSpec {
            via: Some(c.gateway_addr().addr().into()),
            dev: Some(c.host_link.clone()),
            table: HOST_TABLE,
            mtu: Some(c.mtu),
            ..RouteSpec::to(IpNet::V4(n))
        })
        .collect()
}

/// The one rule of the host namespace that consults [`HOST_TABLE`], whatever the number of peers
/// (none without peers).
///
/// The kernel walks the rules for every packet it routes, so a rule per peer range (what one
/// would write by hand) makes every forwarded packet pay for every peer: at 1,000 peers a third
/// of the CPU went to `fib_rules_lookup`. Instead the table decides: it holds only the peers'
/// ranges, and a destination it does not hold falls through to the next rule (a lookup that
/// finds no route continues the rule walk), so other traffic is routed as before at the cost of
/// one trie lookup.
pub fn host_rules(c: &Config) -> Vec<RuleSpec> {
    // Without peers there is nothing to look up: a gateway left alone leaves the node's rules
    // as it found them.
    if !c.host_routes || c.peers.is_empty() {
        return Vec::new();
    }
    vec![RuleSpec {
        priority: HOST_RULE_PRIORITY,
        from: None,
        to: None,
        iif: None,
        fwmark: None,
        table: HOST_TABLE,
        v6: false,
    }]
}

mod endpoints;
#[cfg(test)]
mod tests;

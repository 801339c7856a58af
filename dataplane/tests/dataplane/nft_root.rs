//! nftables on the real kernel (needs root): atomic replacement and prefix NAT on real packets
//! (by one address, and by two through a mark).

use crate::common;

use common::{
    TestNs,
    gateway_nft::{self, id},
    wire,
};
use dataplane::{
    addr::AddressSpec,
    nft::{
        self, AddrType, BaseChain, Chain, ChainKind, Expr, Family, Field, Hook, Map, Policy, Rule,
        Ruleset,
    },
    route::RouteSpec,
};

fn nat_chain(name: &str, hook: Hook, priority: i32, rules: Vec<Rule>) -> Chain {
    gateway_nft::chain(name, ChainKind::Nat, hook, priority, rules)
}

/// Destination 10.71.0.0/16 -> 10.200.0.0/16 and source 10.1.0.0/24 -> 10.99.0.0/24, host bits kept.
fn netmap_ruleset() -> Ruleset {
    let mut rs = Ruleset::new(Family::Ip, id("dpt_nat"));
    rs.maps.push(Map {
        name: id("dst_view"),
        addr: AddrType::V4,
        entries: vec![(
            "10.71.0.0/16".parse().unwrap(),
            "10.200.0.0/16".parse().unwrap(),
        )],
    });
    rs.maps.push(Map {
        name: id("src_view"),
        addr: AddrType::V4,
        entries: vec![(
            "10.1.0.0/24".parse().unwrap(),
            "10.99.0.0/24".parse().unwrap(),
        )],
    });
    rs.chains.push(nat_chain(
        "pre",
        Hook::Prerouting,
        -100,
        vec![Rule::new(vec![
            Expr::InSet(Field::Daddr, id("dst_view")),
            Expr::Counter,
            Expr::DnatPrefixMap(id("dst_view")),
        ])],
    ));
    rs.chains.push(nat_chain(
        "post",
        Hook::Postrouting,
        100,
        vec![Rule::new(vec![
            Expr::InSet(Field::Saddr, id("src_view")),
            Expr::SnatPrefixMap(id("src_view")),
        ])],
    ));
    rs.chains.push(Chain {
        name: id("mss"),
        base: Some(BaseChain {
            kind: ChainKind::Filter,
            hook: Hook::Forward,
            priority: -150,
            policy: Policy::Accept,
        }),
        rules: vec![Rule::new(vec![Expr::ClampMssToPmtu]).comment("clamp")],
    });
    rs
}

fn rule_count(objs: &[serde_json::Value]) -> usize {
    objs.iter().filter(|o| o.get("rule").is_some()).count()
}

#[tokio::test]
async fn apply_is_atomic_and_idempotent() {
    let t = TestNs::new("nft").await;
    let rs = netmap_ruleset();
    assert!(
        nft::list(Some(&t.ns), Family::Ip, &rs.table)
            .unwrap()
            .is_none()
    );
    nft::apply(Some(&t.ns), &rs).unwrap();
    nft::apply(Some(&t.ns), &rs).unwrap();
    let objs = nft::list(Some(&t.ns), Family::Ip, &rs.table)
        .unwrap()
        .unwrap();
    assert_eq!(
        rule_count(&objs),
        3,
        "re-applying replaces, never duplicates"
    );

    // A batch the kernel refuses (a nat chain on the forward hook) must leave the old table.
    let mut bad = rs.clone();
    bad.chains
        .push(nat_chain("fwdnat", Hook::Forward, 0, vec![]));
    let e = nft::apply(Some(&t.ns), &bad).unwrap_err();
    assert!(e.to_string().contains("applying table ip dpt_nat"), "{e}");
    assert_eq!(
        nft::list(Some(&t.ns), Family::Ip, &rs.table)
            .unwrap()
            .unwrap(),
        objs,
        "refused batch changed nothing"
    );

    // Our table is ours alone: another table survives our apply and our delete.
    let other = Ruleset::new(Family::Inet, id("someone_else"));
    nft::apply(Some(&t.ns), &other).unwrap();
    nft::apply(Some(&t.ns), &rs).unwrap();
    nft::delete(Some(&t.ns), Family::Ip, &rs.table).unwrap();
    nft::delete(Some(&t.ns), Family::Ip, &rs.table).unwrap();
    let tables = nft::tables(Some(&t.ns)).unwrap();
    assert_eq!(tables, vec![(Family::Inet, id("someone_else"))]);
}

#[tokio::test]
async fn netmap_translates_real_packets_keeping_host_bits() {
    // a (10.1.0.7) -- r -- b (10.200.0.5); a dials 10.71.0.5 and b sees 10.99.0.7.
    let (a, r, b) = (
        TestNs::new("nma").await,
        TestNs::new("nmr").await,
        TestNs::new("nmb").await,
    );
    wire(&a, "eth0", "10.1.0.7/24", &r, "eth0", "10.1.0.1/24").await;
    wire(&r, "eth1", "10.200.0.1/24", &b, "eth0", "10.200.0.5/24").await;
    r.ns.run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    let via = |dst: &str, gw: &str| RouteSpec {
        via: Some(gw.parse().unwrap()),
        ..RouteSpec::to(dst.parse().unwrap())
    };
    a.nl()
        .add_route(&via("10.71.0.0/16", "10.1.0.1"))
        .await
        .unwrap();
    b.nl()
        .add_route(&via("10.99.0.0/24", "10.200.0.1"))
        .await
        .unwrap();
    assert!(
        !a.ping("10.71.0.5"),
        "nothing answers before the NAT exists"
    );
    nft::apply(Some(&r.ns), &netmap_ruleset()).unwrap();
    assert!(a.ping("10.71.0.5"));

    let seen = common::tcp_source_seen(&a, &b, "10.200.0.5:7001", "10.71.0.5:7001");
    assert_eq!(
        seen, "10.99.0.7",
        "source translated by prefix, host bits kept"
    );
}

/// The gateway's translation by two addresses: peer ranges 10.71.0.0/16 and 10.73.0.0/16 see
/// our pods (10.200.0.0/16) as 10.50.0.0/16 and 10.60.0.0/16.
fn mark_ruleset() -> Ruleset {
    gateway_nft::gateway_like(
        "dpt_marks",
        &[
            ("10.71.0.0/16", "10.50.0.0/16"),
            ("10.73.0.0/16", "10.60.0.0/16"),
        ],
    )
}

#[tokio::test]
async fn mark_maps_translate_by_peer_range_and_view_on_real_packets() {
    // peers (10.71.0.9 and 10.73.0.9) -- tun0: gw :lan0 -- pods (10.200.0.2).
    let (peers, gw, pods) = (
        TestNs::new("mkp").await,
        TestNs::new("mkg").await,
        TestNs::new("mkd").await,
    );
    wire(&peers, "eth0", "10.9.0.2/24", &gw, "tun0", "10.9.0.1/24").await;
    wire(&gw, "lan0", "10.200.0.1/24", &pods, "eth0", "10.200.0.2/24").await;
    gw.ns
        .run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    let route = |dst: &str, gw: &str, src: Option<&str>| RouteSpec {
        via: Some(gw.parse().unwrap()),
        src: src.map(|s| s.parse().unwrap()),
        ..RouteSpec::to(dst.parse().unwrap())
    };
    let (p, g, d) = (peers.nl(), gw.nl(), pods.nl());
    for a in ["10.71.0.9/32", "10.73.0.9/32"] {
        p.add_address(&AddressSpec {
            link: "eth0".parse().unwrap(),
            addr: a.parse().unwrap(),
        })
        .await
        .unwrap();
    }
    for r in [
        route("10.50.0.0/16", "10.9.0.1", Some("10.71.0.9")),
        route("10.60.0.0/16", "10.9.0.1", Some("10.73.0.9")),
    ] {
        p.add_route(&r).await.unwrap();
    }
    for dst in ["10.71.0.0/16", "10.73.0.0/16"] {
        g.add_route(&route(dst, "10.9.0.2", None)).await.unwrap();
        d.add_route(&route(dst, "10.200.0.1", None)).await.unwrap();
    }
    let ping_from = |src: &str, dst: &str| {
        peers
            .sh("ping", &["-c1", "-W2", "-q", "-I", src, dst])
            .status
            .success()
    };
    assert!(
        !ping_from("10.71.0.9", "10.50.0.2"),
        "nothing answers before the NAT exists"
    );
    nft::apply(Some(&gw.ns), &mark_ruleset()).unwrap();

    // Ingress: each peer reaches our pod at the address it was given, as itself.
    assert!(ping_from("10.71.0.9", "10.50.0.2"));
    assert!(ping_from("10.73.0.9", "10.60.0.2"));
    assert_eq!(
        common::tcp_source_seen(&peers, &pods, "10.200.0.2:7002", "10.50.0.2:7002"),
        "10.71.0.9"
    );
    // ... and not at the addresses another peer was given.
    assert!(!ping_from("10.71.0.9", "10.60.0.2"));
    assert!(!ping_from("10.73.0.9", "10.50.0.2"));
    // Egress: our pod appears to each peer as that peer sees our pods.
    assert_eq!(
        common::tcp_source_seen(&pods, &peers, "10.71.0.9:7003", "10.71.0.9:7003"),
        "10.50.0.2"
    );
    assert_eq!(
        common::tcp_source_seen(&pods, &peers, "10.73.0.9:7004", "10.73.0.9:7004"),
        "10.60.0.2"
    );
}

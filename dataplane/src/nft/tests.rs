use ipnet::IpNet;

use super::{build::*, *};

fn id(s: &str) -> Ident {
    s.parse().unwrap()
}

/// A ruleset shaped like the gateway's: prefix translation through maps, masquerade, MSS clamp.
fn gateway_like() -> Ruleset {
    let mut rs = Ruleset::new(Family::Ip, id("liqo_gw"));
    rs.sets.push(Set {
        name: id("remote"),
        addr: AddrType::V4,
        prefixes: vec!["10.71.0.0/16".parse().unwrap()],
    });
    rs.maps.push(Map {
        name: id("dnat_remote"),
        addr: AddrType::V4,
        entries: vec![(
            "10.71.0.0/16".parse().unwrap(),
            "10.200.0.0/16".parse().unwrap(),
        )],
    });
    rs.maps.push(Map {
        name: id("snat_local"),
        addr: AddrType::V4,
        entries: vec![],
    });
    let nat = |hook, priority| {
        Some(BaseChain {
            kind: ChainKind::Nat,
            hook,
            priority,
            policy: Policy::Accept,
        })
    };
    rs.chains.push(Chain {
        name: id("pre"),
        base: nat(Hook::Prerouting, -100),
        rules: vec![
            Rule::new(vec![
                Expr::Iif("eth0".parse().unwrap()),
                Expr::InSet(Field::Daddr, id("remote")),
                Expr::Counter,
                Expr::DnatPrefixMap(id("dnat_remote")),
            ])
            .comment("peer views"),
        ],
    });
    rs.chains.push(Chain {
        name: id("post"),
        base: nat(Hook::Postrouting, 100),
        rules: vec![
            Rule::new(vec![
                Expr::Prefix(Field::Saddr, "10.200.0.0/16".parse().unwrap()),
                Expr::SnatPrefixMap(id("snat_local")),
            ]),
            Rule::new(vec![Expr::Oif("wan0".parse().unwrap()), Expr::Masquerade]),
        ],
    });
    rs.chains.push(Chain {
        name: id("mss"),
        base: Some(BaseChain {
            kind: ChainKind::Filter,
            hook: Hook::Forward,
            priority: -150,
            policy: Policy::Accept,
        }),
        rules: vec![Rule::new(vec![Expr::ClampMssToPmtu])],
    });
    rs
}

#[test]
fn gateway_like_batch_snapshot() {
    insta::assert_snapshot!(batch(&gateway_like()).unwrap());
}

#[test]
fn batch_starts_by_replacing_the_table() {
    let b = batch(&gateway_like()).unwrap();
    let lines: Vec<&str> = b.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "add table ip liqo_gw",
            "delete table ip liqo_gw",
            "add table ip liqo_gw"
        ]
    );
    assert!(
        lines[3..].iter().all(|l| l.starts_with("add ")),
        "only additions after the reset"
    );
}

#[test]
fn delete_batch_is_add_then_delete() {
    assert_eq!(
        delete_batch(Family::Inet, &id("t")),
        "add table inet t\ndelete table inet t\n"
    );
}

#[test]
fn comments_cannot_break_out_of_their_quotes() {
    let mut rs = gateway_like();
    rs.chains[0].rules[0].comment = Some("x\" accept".into());
    assert!(matches!(batch(&rs), Err(BuildError::BadComment { .. })));
}

#[test]
fn duplicate_names_are_refused() {
    let mut rs = gateway_like();
    rs.sets.push(Set {
        name: id("dnat_remote"),
        addr: AddrType::V4,
        prefixes: vec![],
    });
    assert_eq!(
        batch(&rs).unwrap_err().to_string(),
        "table liqo_gw: duplicate name dnat_remote"
    );
}

#[test]
fn unknown_references_name_chain_rule_and_target() {
    let mut rs = gateway_like();
    rs.chains[1]
        .rules
        .push(Rule::new(vec![Expr::SnatPrefixMap(id("nope"))]));
    assert_eq!(
        batch(&rs).unwrap_err().to_string(),
        "table liqo_gw chain post: rule 2 refers to unknown map nope"
    );
    let mut rs = gateway_like();
    rs.chains[0]
        .rules
        .push(Rule::new(vec![Expr::Jump(id("missing"))]));
    assert_eq!(
        batch(&rs).unwrap_err().to_string(),
        "table liqo_gw chain pre: rule 1 refers to unknown chain missing"
    );
    let mut rs = gateway_like();
    rs.chains[0]
        .rules
        .push(Rule::new(vec![Expr::DnatPrefixMap(id("remote"))]));
    assert!(
        matches!(batch(&rs), Err(BuildError::Unknown { what: "map", .. })),
        "a set is not a map"
    );
}

#[test]
fn bad_map_elements_are_refused() {
    let mut rs = gateway_like();
    rs.maps[0].entries.push((
        "10.72.0.0/16".parse().unwrap(),
        "10.201.0.0/24".parse().unwrap(),
    ));
    let e = batch(&rs).unwrap_err().to_string();
    assert!(
        e.contains("10.72.0.0/16 : 10.201.0.0/24") && e.contains("prefix lengths differ"),
        "{e}"
    );
    let mut rs = gateway_like();
    rs.sets[0].prefixes.push("10.80.0.1/16".parse().unwrap());
    assert!(
        batch(&rs)
            .unwrap_err()
            .to_string()
            .contains("host bits set")
    );
    let mut rs = gateway_like();
    rs.sets[0].prefixes.push("fd00::/64".parse().unwrap());
    assert!(
        batch(&rs)
            .unwrap_err()
            .to_string()
            .contains("wrong IP version")
    );
}

#[test]
fn ipv6_prefix_in_an_ipv4_table_is_refused() {
    let mut rs = gateway_like();
    rs.chains[1].rules.push(Rule::new(vec![
        Expr::Prefix(Field::Saddr, "fd00::/64".parse().unwrap()),
        Expr::Accept,
    ]));
    assert!(matches!(batch(&rs), Err(BuildError::WrongFamily { .. })));
}

#[test]
fn identifiers_are_validated() {
    assert!("liqo_gw".parse::<Ident>().is_ok());
    assert!("1abc".parse::<Ident>().is_err());
    assert!("a b".parse::<Ident>().is_err());
    assert!("".parse::<Ident>().is_err());
}

#[test]
fn mark_maps_translate_by_two_addresses() {
    let net = |s: &str| s.parse::<IpNet>().unwrap();
    let mut rs = Ruleset::new(Family::Ip, id("gw"));
    rs.mark_maps.push(MarkMap {
        name: id("peers"),
        addr: AddrType::V4,
        entries: vec![(net("10.71.0.0/16"), 0x0a47_0000), (net("10.72.0.0/24"), 7)],
    });
    rs.mark_prefix_maps.push(MarkPrefixMap {
        name: id("snat_pod"),
        addr: AddrType::V4,
        prefix_len: 16,
        entries: vec![
            ((0x0a47_0000, net("10.200.0.0/16")), net("10.50.0.0/16")),
            ((7, net("10.200.0.0/16")), net("10.60.0.0/16")),
        ],
    });
    rs.chains.push(Chain {
        name: id("post"),
        base: Some(BaseChain {
            kind: ChainKind::Nat,
            hook: Hook::Postrouting,
            priority: 100,
            policy: Policy::Accept,
        }),
        rules: vec![Rule::new(vec![
            Expr::Oif("tun0".parse().unwrap()),
            Expr::SetMarkMap(Field::Daddr, id("peers")),
            Expr::SnatPrefixMarkMap(id("snat_pod")),
        ])],
    });
    let b = batch(&rs).unwrap();
    assert!(b.contains("add map ip gw peers { type ipv4_addr : mark; flags interval; elements = { 10.71.0.0/16 : 0xa470000, 10.72.0.0/24 : 0x7 }; }"), "{b}");
    assert!(b.contains("add map ip gw snat_pod { type mark . ipv4_addr : interval ipv4_addr; elements = { 0xa470000 . 10.200.0.0 : 10.50.0.0/16, 0x7 . 10.200.0.0 : 10.60.0.0/16 }; }"), "{b}");
    assert!(b.contains("add rule ip gw post oifname \"tun0\" meta mark set ip daddr map @peers snat ip prefix to meta mark . (ip saddr & 255.255.0.0) map @snat_pod"), "{b}");
    rs.chains[0].rules[0].exprs[2] = Expr::DnatPrefixMarkMap(id("snat_pod"));
    assert!(
        batch(&rs)
            .unwrap()
            .contains("dnat ip prefix to meta mark . (ip daddr & 255.255.0.0) map @snat_pod")
    );
    // A mark prefix map is no set, a mark map no mark prefix map.
    rs.chains[0]
        .rules
        .push(Rule::new(vec![Expr::InSet(Field::Daddr, id("snat_pod"))]));
    assert!(matches!(
        batch(&rs),
        Err(BuildError::Unknown { what: "set", .. })
    ));
    rs.chains[0].rules[1] = Rule::new(vec![Expr::SnatPrefixMarkMap(id("peers"))]);
    assert!(matches!(
        batch(&rs),
        Err(BuildError::Unknown {
            what: "mark prefix map",
            ..
        })
    ));
    rs.chains[0].rules[1] = Rule::new(vec![Expr::InSet(Field::Daddr, id("peers"))]);
    assert!(batch(&rs).is_ok(), "a mark map's keys are a set");
    // Every key prefix and value has the map's length.
    rs.mark_prefix_maps[0]
        .entries
        .push(((8, net("10.200.0.0/16")), net("10.61.0.0/24")));
    assert!(
        batch(&rs)
            .unwrap_err()
            .to_string()
            .contains("not of the map's prefix length")
    );
    rs.mark_prefix_maps[0].entries.pop();
    rs.mark_prefix_maps[0].prefix_len = 33;
    assert_eq!(
        batch(&rs).unwrap_err().to_string(),
        "table gw map snat_pod: prefix length 33 is too long for its addresses"
    );
    rs.mark_prefix_maps[0].prefix_len = 16;
    rs.mark_maps[0].entries.push((net("10.73.0.1/16"), 9));
    assert!(
        batch(&rs)
            .unwrap_err()
            .to_string()
            .contains("host bits set")
    );
}

#[test]
fn mark_addr_maps_pick_a_source_by_mark() {
    let net = |s: &str| s.parse::<IpNet>().unwrap();
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let mut rs = Ruleset::new(Family::Ip, id("gw"));
    rs.mark_maps.push(MarkMap {
        name: id("peers"),
        addr: AddrType::V4,
        entries: vec![(net("10.71.0.0/16"), 0x0a47_0000)],
    });
    rs.mark_addr_maps.push(MarkAddrMap {
        name: id("snat_host"),
        addr: AddrType::V4,
        entries: vec![(0x0a47_0000, ip("10.51.0.0")), (7, ip("10.61.0.0"))],
    });
    rs.chains.push(Chain {
        name: id("post"),
        base: Some(BaseChain {
            kind: ChainKind::Nat,
            hook: Hook::Postrouting,
            priority: 100,
            policy: Policy::Accept,
        }),
        rules: vec![Rule::new(vec![
            Expr::Oif("tun0".parse().unwrap()),
            Expr::SetMarkMap(Field::Daddr, id("peers")),
            Expr::SnatMarkMap(id("snat_host")),
        ])],
    });
    let b = batch(&rs).unwrap();
    assert!(
        b.contains("add map ip gw snat_host { type mark : ipv4_addr; elements = { 0xa470000 : 10.51.0.0, 0x7 : 10.61.0.0 }; }"),
        "{b}"
    );
    assert!(
        b.contains("add rule ip gw post oifname \"tun0\" meta mark set ip daddr map @peers snat ip to meta mark map @snat_host"),
        "{b}"
    );
    // Its keys are marks: no set of addresses; and only it serves `snat to meta mark map`.
    rs.chains[0]
        .rules
        .push(Rule::new(vec![Expr::InSet(Field::Daddr, id("snat_host"))]));
    assert!(matches!(
        batch(&rs),
        Err(BuildError::Unknown { what: "set", .. })
    ));
    rs.chains[0].rules[1] = Rule::new(vec![Expr::SnatMarkMap(id("peers"))]);
    assert!(matches!(
        batch(&rs),
        Err(BuildError::Unknown {
            what: "mark addr map",
            ..
        })
    ));
    rs.chains[0].rules.pop();
    // One value per mark, of the map's IP version.
    rs.mark_addr_maps[0].entries.push((7, ip("10.62.0.0")));
    let e = batch(&rs).unwrap_err().to_string();
    assert!(e.contains("0x7") && e.contains("two values"), "{e}");
    rs.mark_addr_maps[0].entries.pop();
    rs.mark_addr_maps[0].entries.push((8, ip("fd00::1")));
    assert!(
        batch(&rs)
            .unwrap_err()
            .to_string()
            .contains("wrong IP version")
    );
}

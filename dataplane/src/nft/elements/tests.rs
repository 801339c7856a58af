use super::*;
use crate::nft::{Family, Map, MarkMap, MarkPrefixMap, Set};

fn id(s: &str) -> Ident {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// A table with a set `s` of `local` and a mark prefix map `m` (of /16s) of `marked`.
pub(crate) fn ruleset(marked: &[(u32, &str, &str)], local: &[&str]) -> Ruleset {
    let mut rs = Ruleset::new(Family::Ip, id("t"));
    rs.sets.push(Set {
        name: id("s"),
        addr: AddrType::V4,
        prefixes: local.iter().map(|p| net(p)).collect(),
    });
    rs.mark_prefix_maps.push(MarkPrefixMap {
        name: id("m"),
        addr: AddrType::V4,
        prefix_len: 16,
        entries: marked
            .iter()
            .map(|(mark, b, to)| ((*mark, net(b)), net(to)))
            .collect(),
    });
    rs
}

pub(crate) fn diff_of(prev: &Ruleset, next: &Ruleset) -> Vec<SetDiff> {
    assert!(only_elements_differ(prev, next));
    diff(&of(prev).unwrap(), &of(next).unwrap())
}

fn kinds(v: &[Elem]) -> Vec<String> {
    v.iter()
        .map(|e| match e.kind {
            Kind::End { .. } | Kind::ZeroEnd { .. } => format!("end of {e}"),
            _ => e.to_string(),
        })
        .collect()
}

#[test]
fn an_interval_is_a_start_and_an_end_sorted_as_nft_sends_them() {
    let d = diff_of(
        &ruleset(&[], &["10.200.0.0/16"]),
        &ruleset(&[], &["10.200.0.0/16", "10.201.0.0/16", "10.202.0.0/24"]),
    );
    assert_eq!(d.len(), 1, "the empty map did not change");
    assert_eq!((d[0].name.as_str(), d[0].kind), ("s", "set"));
    assert_eq!(d[0].counts(), (0, 2));
    // The end of 10.201.0.0/16 and the start of 10.202.0.0/24 share a key: the end comes first.
    assert_eq!(
        kinds(&d[0].add),
        [
            "10.201.0.0/16",
            "end of 10.201.0.0/16",
            "10.202.0.0/24",
            "end of 10.202.0.0/24"
        ]
    );
    // ... though the end of 10.200.0.0/16 (key 10.201.0.0) was there already.
    assert!(d[0].del.is_empty());
}

#[test]
fn filling_an_empty_set_adds_nfts_end_at_zero_and_emptying_keeps_it() {
    let empty = ruleset(&[], &[]);
    let one = ruleset(&[], &["10.200.0.0/16"]);
    let d = diff_of(&empty, &one);
    assert_eq!(
        kinds(&d[0].add),
        [
            "end of the interval end at address 0",
            "10.200.0.0/16",
            "end of 10.200.0.0/16"
        ]
    );
    assert_eq!(d[0].counts(), (0, 1));
    let back = diff_of(&one, &empty);
    assert_eq!(
        kinds(&back[0].del),
        ["10.200.0.0/16", "end of 10.200.0.0/16"],
        "not the end at 0"
    );
    // A prefix from address 0 needs none; one to the last address has no end element.
    let edges = ruleset(&[], &["0.0.0.0/8", "255.0.0.0/8"]);
    let d = diff_of(&empty, &edges);
    assert_eq!(
        kinds(&d[0].add),
        ["0.0.0.0/8", "end of 0.0.0.0/8", "255.0.0.0/8"]
    );
    // A set that had elements gets no end at 0 (nft adds it only to an empty set).
    let d = diff_of(&one, &ruleset(&[], &["10.200.0.0/16", "10.9.0.0/16"]));
    assert_eq!(d[0].counts(), (0, 1));
    assert_eq!(d[0].add.len(), 2);
}

#[test]
fn a_changed_value_is_deleted_then_added_and_only_changes_are_listed() {
    let prev = ruleset(
        &[
            (1, "10.200.0.0/16", "10.50.0.0/16"),
            (2, "10.200.0.0/16", "10.50.0.0/16"),
        ],
        &["10.200.0.0/16"],
    );
    let next = ruleset(
        &[
            (1, "10.200.0.0/16", "10.60.0.0/16"),
            (2, "10.200.0.0/16", "10.50.0.0/16"),
            (3, "10.200.0.0/16", "10.50.0.0/16"),
        ],
        &["10.200.0.0/16"],
    );
    let d = diff_of(&prev, &next);
    assert_eq!(d.len(), 1, "the set did not change");
    assert_eq!((d[0].name.as_str(), d[0].kind), ("m", "map"));
    assert_eq!(kinds(&d[0].del), ["0x1 . 10.200.0.0/16 : 10.50.0.0/16"]);
    assert_eq!(
        kinds(&d[0].add),
        [
            "0x1 . 10.200.0.0/16 : 10.60.0.0/16",
            "0x3 . 10.200.0.0/16 : 10.50.0.0/16"
        ]
    );
    assert!(diff_of(&next, &next).is_empty());
}

#[test]
fn a_plain_map_carries_its_value_on_the_start() {
    let map = |entries: &[(&str, &str)]| {
        let mut rs = Ruleset::new(Family::Ip, id("t"));
        rs.maps.push(Map {
            name: id("v"),
            addr: AddrType::V4,
            entries: entries.iter().map(|(a, b)| (net(a), net(b))).collect(),
        });
        rs
    };
    let d = diff_of(
        &map(&[("10.1.0.0/24", "10.9.0.0/24")]),
        &map(&[("10.1.0.0/24", "10.8.0.0/24")]),
    );
    assert_eq!(kinds(&d[0].del), ["10.1.0.0/24 : 10.9.0.0/24"]);
    assert_eq!(kinds(&d[0].add), ["10.1.0.0/24 : 10.8.0.0/24"]);
}

#[test]
fn a_mark_map_carries_its_mark_on_the_start() {
    let map = |entries: &[(&str, u32)]| {
        let mut rs = Ruleset::new(Family::Ip, id("t"));
        rs.mark_maps.push(MarkMap {
            name: id("r"),
            addr: AddrType::V4,
            entries: entries.iter().map(|(a, m)| (net(a), *m)).collect(),
        });
        rs
    };
    let empty = map(&[]);
    let one = map(&[("10.1.0.0/24", 0x0a01_0000)]);
    let d = diff_of(&empty, &one);
    assert_eq!((d[0].name.as_str(), d[0].kind), ("r", "map"));
    assert_eq!(
        kinds(&d[0].add),
        [
            "end of the interval end at address 0",
            "10.1.0.0/24 : 0xa010000",
            "end of 10.1.0.0/24"
        ]
    );
    let d = diff_of(&one, &map(&[("10.1.0.0/24", 7)]));
    assert_eq!(kinds(&d[0].del), ["10.1.0.0/24 : 0xa010000"]);
    assert_eq!(kinds(&d[0].add), ["10.1.0.0/24 : 0x7"]);
}

#[test]
fn anything_but_elements_is_not_an_element_change() {
    let a = ruleset(&[], &["10.200.0.0/16"]);
    let mut b = a.clone();
    b.sets[0].name = id("other");
    assert!(!only_elements_differ(&a, &b));
    let mut b = a.clone();
    b.table = id("u");
    assert!(!only_elements_differ(&a, &b));
    let mut b = a.clone();
    b.sets[0].addr = AddrType::V6;
    assert!(!only_elements_differ(&a, &b));
    let mut b = a.clone();
    b.chains.push(crate::nft::Chain {
        name: id("c"),
        base: None,
        rules: vec![],
    });
    assert!(!only_elements_differ(&a, &b));
    let mut b = a.clone();
    b.mark_prefix_maps.clear();
    assert!(!only_elements_differ(&a, &b));
    let mut b = a.clone();
    b.mark_prefix_maps[0].prefix_len = 24;
    assert!(
        !only_elements_differ(&a, &b),
        "another mask is another rule"
    );
}

#[test]
fn entries_are_checked_like_a_full_apply_checks_them() {
    let mut bad = ruleset(&[(1, "10.200.0.0/16", "10.50.0.0/24")], &[]);
    let e = of(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "table t map m: element 0x1 . 10.200.0.0/16 : 10.50.0.0/24: not of the map's prefix length; the lookup masks the address to it"
    );
    bad.mark_prefix_maps[0].entries[0].0.1 = net("10.200.0.1/16");
    assert!(matches!(
        of(&bad),
        Err(BuildError::BadElement {
            problem: "host bits set",
            ..
        })
    ));
    bad.mark_prefix_maps[0].entries.clear();
    bad.sets[0].prefixes.push("10.200.0.1/16".parse().unwrap());
    assert!(matches!(
        of(&bad),
        Err(BuildError::BadElement {
            problem: "host bits set",
            ..
        })
    ));
}

#[test]
fn a_mark_addr_map_entry_is_one_element_keyed_by_its_mark() {
    let map = |entries: &[(u32, &str)]| {
        let mut rs = Ruleset::new(Family::Ip, id("t"));
        rs.mark_addr_maps.push(crate::nft::MarkAddrMap {
            name: id("h"),
            addr: AddrType::V4,
            entries: entries
                .iter()
                .map(|(m, a)| (*m, a.parse().unwrap()))
                .collect(),
        });
        rs
    };
    let empty = map(&[]);
    let two = map(&[(2, "10.51.0.0"), (1, "10.61.0.0")]);
    let d = diff_of(&empty, &two);
    assert_eq!((d[0].name.as_str(), d[0].kind), ("h", "map"));
    assert_eq!(
        kinds(&d[0].add),
        ["0x1 : 10.61.0.0", "0x2 : 10.51.0.0"],
        "no end at 0"
    );
    let d = diff_of(&two, &map(&[(1, "10.61.0.0"), (2, "10.52.0.0")]));
    assert_eq!(kinds(&d[0].del), ["0x2 : 10.51.0.0"]);
    assert_eq!(kinds(&d[0].add), ["0x2 : 10.52.0.0"]);
    assert_eq!(d[0].counts(), (1, 1));
    let mut renamed = two.clone();
    renamed.mark_addr_maps[0].name = id("other");
    assert!(!only_elements_differ(&two, &renamed));
}

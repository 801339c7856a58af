//! A [`Session`] on the real kernel (needs root): after a full apply, element changes go as one
//! nf_tables transaction, and after each the table lists exactly as a fresh full apply of the
//! same ruleset does; a refused element is named and changes nothing; drift is repaired.

use crate::common;

use common::{
    TestNs,
    gateway_nft::{chain, gateway_like, id, mark, net},
};
use dataplane::nft::{
    self, AddrType, Applied, ChainKind, Expr, Field, Hook, Map, Rule, Ruleset, Session, Set,
};
use serde_json::Value;

/// A table shaped like the gateway's ([`gateway_like`]) plus a plain prefix map, a set and a
/// filter chain.
fn ruleset(pairs: &[(&str, &str)], views: &[(&str, &str)], local: &[&str]) -> Ruleset {
    let mut rs = gateway_like("dpt_gw", pairs);
    rs.maps.push(Map {
        name: id("views"),
        addr: AddrType::V4,
        entries: views.iter().map(|(a, b)| (net(a), net(b))).collect(),
    });
    rs.sets.push(Set {
        name: id("local_pods"),
        addr: AddrType::V4,
        prefixes: local.iter().map(|p| net(p)).collect(),
    });
    rs.chains[0].rules.push(Rule::new(vec![
        Expr::InSet(Field::Daddr, id("views")),
        Expr::DnatPrefixMap(id("views")),
    ]));
    rs.chains.push(chain(
        "from_peers",
        ChainKind::Filter,
        Hook::Forward,
        0,
        vec![Rule::new(vec![
            Expr::Iif("tun0".parse().unwrap()),
            Expr::NotInSet(Field::Daddr, id("local_pods")),
            Expr::Counter,
            Expr::Drop,
        ])],
    ));
    rs
}

/// `nft -j list table` without handles (they count objects ever created), elements sorted (a
/// hash map lists its elements in an order of its own, so a map grown element by element may
/// list them in another order than one filled at once).
fn listing(t: &TestNs, rs: &Ruleset) -> Vec<Value> {
    fn clean(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("handle");
                o.values_mut().for_each(clean);
                if let Some(Value::Array(elems)) = o.get_mut("elem") {
                    elems.sort_by_key(|e| e.to_string());
                }
            }
            Value::Array(a) => a.iter_mut().for_each(clean),
            _ => {}
        }
    }
    let mut objs = nft::list(Some(&t.ns), rs.family, &rs.table)
        .unwrap()
        .expect("the table exists");
    objs.iter_mut().for_each(clean);
    objs
}

/// Applies `rs` through `s` in `inc` and fresh (replacing) in `fresh`; both must list alike.
fn step(s: &mut Session, inc: &TestNs, fresh: &TestNs, rs: &Ruleset) -> Applied {
    let how = s.apply(rs).unwrap();
    nft::delete(Some(&fresh.ns), rs.family, &rs.table).unwrap();
    nft::apply(Some(&fresh.ns), rs).unwrap();
    assert_eq!(listing(inc, rs), listing(fresh, rs), "after {how:?}");
    how
}

#[tokio::test]
async fn element_changes_list_like_a_fresh_apply() {
    let (inc, fresh) = (TestNs::new("inc").await, TestNs::new("fresh").await);
    let mut s = Session::open(Some(&inc.ns)).unwrap();
    let first = ruleset(
        &[("10.71.0.0/16", "10.50.0.0/16")],
        &[("10.90.0.0/24", "10.91.0.0/24")],
        &["10.200.0.0/16"],
    );
    assert_eq!(step(&mut s, &inc, &fresh, &first), Applied::Replaced);
    assert_eq!(s.apply(&first).unwrap(), Applied::Unchanged);

    let more = ruleset(
        &[
            ("10.71.0.0/16", "10.50.0.0/16"),
            ("10.72.0.0/16", "10.50.0.0/16"),
            ("10.73.1.0/24", "10.51.0.0/16"),
            ("10.74.0.0/16", "10.52.0.0/16"),
        ],
        &[
            ("10.90.0.0/24", "10.91.0.0/24"),
            ("10.92.0.0/16", "10.93.0.0/16"),
        ],
        &["10.200.0.0/16"],
    );
    assert_eq!(
        step(&mut s, &inc, &fresh, &more),
        Applied::Elements {
            removed: 0,
            added: 10
        }
    );
    // The same entries in another order: nothing to send.
    let mut reordered = more.clone();
    reordered.mark_prefix_maps[0].entries.reverse();
    reordered.mark_maps[0].entries.reverse();
    assert_eq!(s.apply(&reordered).unwrap(), Applied::Unchanged);
    assert_eq!(s.apply(&more).unwrap(), Applied::Unchanged);
    // One goes, one changes its value, one comes; the plain map's value changes; the set moves.
    let changed = ruleset(
        &[
            ("10.71.0.0/16", "10.50.0.0/16"),
            ("10.73.1.0/24", "10.59.0.0/16"),
            ("10.74.0.0/16", "10.52.0.0/16"),
            ("10.75.0.0/24", "10.53.0.0/16"),
        ],
        &[
            ("10.90.0.0/24", "10.94.0.0/24"),
            ("10.92.0.0/16", "10.93.0.0/16"),
        ],
        &["10.201.0.0/16", "10.202.0.0/24"],
    );
    assert!(matches!(
        step(&mut s, &inc, &fresh, &changed),
        Applied::Elements { .. }
    ));
    let empty = ruleset(&[], &[], &[]);
    assert!(matches!(
        step(&mut s, &inc, &fresh, &empty),
        Applied::Elements { added: 0, .. }
    ));
    // Refilled from empty, edges of the address space included.
    let edges = ruleset(
        &[("10.71.0.0/16", "10.50.0.0/16")],
        &[("0.0.0.0/8", "11.0.0.0/8"), ("255.0.0.0/8", "12.0.0.0/8")],
        &["0.0.0.0/8", "10.200.0.0/16", "255.255.255.0/24"],
    );
    assert!(matches!(
        step(&mut s, &inc, &fresh, &edges),
        Applied::Elements { removed: 0, .. }
    ));
    assert!(matches!(
        step(&mut s, &inc, &fresh, &first),
        Applied::Elements { .. }
    ));
    assert!(matches!(
        step(&mut s, &inc, &fresh, &more),
        Applied::Elements { .. }
    ));

    // Most peers leave at once: still one transaction of elements (deleting from a mark map or
    // a mark prefix map costs the same whatever its size).
    let names: Vec<(String, &str)> = (0..300)
        .map(|i| {
            (
                format!("10.{}.{}.0/24", 64 + i / 256, i % 256),
                "10.50.0.0/16",
            )
        })
        .collect();
    let many: Vec<(&str, &str)> = names.iter().map(|(a, b)| (a.as_str(), *b)).collect();
    let crowd = ruleset(&many, &[], &["10.200.0.0/16"]);
    assert!(matches!(
        step(&mut s, &inc, &fresh, &crowd),
        Applied::Elements { added: 900, .. }
    ));
    assert!(matches!(
        step(&mut s, &inc, &fresh, &more),
        Applied::Elements { .. }
    ));

    // A rule changed: the table is replaced.
    let mut other_rules = more.clone();
    other_rules.chains[2]
        .rules
        .push(Rule::new(vec![Expr::Counter]));
    assert_eq!(step(&mut s, &inc, &fresh, &other_rules), Applied::Replaced);
    assert_eq!(step(&mut s, &inc, &fresh, &more), Applied::Replaced);
}

#[tokio::test]
async fn drift_is_repaired_and_a_bad_element_is_named_and_changes_nothing() {
    let (inc, fresh) = (TestNs::new("drift").await, TestNs::new("dfresh").await);
    let mut s = Session::open(Some(&inc.ns)).unwrap();
    let rs = ruleset(
        &[
            ("10.71.0.0/16", "10.50.0.0/16"),
            ("10.72.0.0/16", "10.50.0.0/16"),
        ],
        &[],
        &["10.200.0.0/16"],
    );
    assert_eq!(step(&mut s, &inc, &fresh, &rs), Applied::Replaced);
    // Someone removes an element by hand: the same ruleset again notices and repairs it.
    let out = inc.sh(
        "nft",
        &[
            "delete",
            "element",
            "ip",
            "dpt_gw",
            "snat_pod",
            "{ 0x0a480000 . 10.200.0.0 }",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_ne!(listing(&inc, &rs), listing(&fresh, &rs));
    assert_eq!(step(&mut s, &inc, &fresh, &rs), Applied::Replaced);
    assert_eq!(s.apply(&rs).unwrap(), Applied::Unchanged);
    // Another table changed in the namespace: an element change is not sent against a
    // generation that moved; the table is replaced instead.
    let out = inc.sh("nft", &["add", "table", "inet", "someone_else"]);
    assert!(out.status.success(), "{out:?}");
    let more = ruleset(
        &[
            ("10.71.0.0/16", "10.50.0.0/16"),
            ("10.72.0.0/16", "10.50.0.0/16"),
            ("10.73.0.0/16", "10.50.0.0/16"),
        ],
        &[],
        &["10.200.0.0/16"],
    );
    assert_eq!(step(&mut s, &inc, &fresh, &more), Applied::Replaced);

    // An element overlapping one already there: refused, named, nothing changed.
    let before = listing(&inc, &more);
    let mut bad = more.clone();
    bad.mark_maps[0]
        .entries
        .push((net("10.71.5.0/24"), mark("10.71.5.0/24")));
    bad.mark_maps[0]
        .entries
        .push((net("10.76.0.0/16"), mark("10.76.0.0/16")));
    let e = s.apply(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "table ip dpt_gw: adding element 10.71.5.0/24 : 0xa470500 to map peer_ranges (it overlaps or clashes with an element already there)"
    );
    assert_eq!(
        std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .and_then(std::io::Error::raw_os_error),
        Some(libc::EEXIST)
    );
    assert_eq!(
        listing(&inc, &more),
        before,
        "the transaction was undone whole"
    );
    // Forgotten: the next apply replaces the table.
    assert_eq!(step(&mut s, &inc, &fresh, &more), Applied::Replaced);
    // A second value for a key of a mark prefix map: refused the same way.
    let mut clash = more.clone();
    clash.mark_prefix_maps[0].entries.push((
        (mark("10.71.0.0/16"), net("10.200.0.0/16")),
        net("10.60.0.0/16"),
    ));
    let e = s.apply(&clash).unwrap_err();
    assert_eq!(
        e.to_string(),
        "table ip dpt_gw: adding element 0xa470000 . 10.200.0.0/16 : 10.60.0.0/16 to map snat_pod (it overlaps or clashes with an element already there)"
    );
    assert_eq!(listing(&inc, &more), before);
    assert_eq!(step(&mut s, &inc, &fresh, &more), Applied::Replaced);

    // An invalid ruleset is refused before anything is sent.
    let mut invalid = more.clone();
    invalid.sets[0].prefixes.push(net("10.200.0.0/16").trunc());
    invalid.sets[0].prefixes[0] = "10.200.0.1/16".parse().unwrap();
    assert!(matches!(s.apply(&invalid), Err(nft::Error::Build(_))));
    assert_eq!(listing(&inc, &more), before);
}

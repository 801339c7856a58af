//! The gateway's endpoint maps on the real kernel (needs root): a mark address map (`mark :
//! address`, the source a translation picks by mark) and a mark prefix map of `/32`s (exact
//! endpoints), changed element by element by a [`Session`], list exactly as a fresh full apply
//! of the same ruleset does, and emptying them leaves no element.

use crate::common;

use std::net::IpAddr;

use common::{
    TestNs,
    gateway_nft::{chain, gateway_like, id, mark, net},
};
use dataplane::nft::{
    self, AddrType, Applied, ChainKind, Expr, Field, Hook, MarkAddrMap, MarkPrefixMap, Rule,
    Ruleset, Session,
};
use serde_json::Value;

/// [`gateway_like`] with `hosts` (`(peer range, source address)`) and `endpoints` (`(peer
/// range, endpoint as the peer sees it, real address)`), and the rules that use them.
fn ruleset(hosts: &[(&str, &str)], endpoints: &[(&str, &str, &str)]) -> Ruleset {
    let mut rs = gateway_like(
        "dpt_ep",
        &[
            ("10.71.0.0/16", "10.50.0.0/16"),
            ("10.72.0.0/16", "10.50.0.0/16"),
        ],
    );
    rs.mark_addr_maps.push(MarkAddrMap {
        name: id("snat_host"),
        addr: AddrType::V4,
        entries: hosts
            .iter()
            .map(|(r, a)| (mark(r), a.parse::<IpAddr>().unwrap()))
            .collect(),
    });
    rs.mark_prefix_maps.push(MarkPrefixMap {
        name: id("dnat_endpoint"),
        addr: AddrType::V4,
        prefix_len: 32,
        entries: endpoints
            .iter()
            .map(|(r, seen, real)| ((mark(r), net(seen)), net(real)))
            .collect(),
    });
    rs.chains.push(chain(
        "post_hosts",
        ChainKind::Nat,
        Hook::Postrouting,
        110,
        vec![Rule::new(vec![
            Expr::Oif("tun0".parse().unwrap()),
            Expr::SetMarkMap(Field::Daddr, id("peer_ranges")),
            Expr::SnatMarkMap(id("snat_host")),
        ])],
    ));
    rs.chains.push(chain(
        "pre_endpoints",
        ChainKind::Nat,
        Hook::Prerouting,
        -90,
        vec![Rule::new(vec![
            Expr::Iif("tun0".parse().unwrap()),
            Expr::SetMarkMap(Field::Saddr, id("peer_ranges")),
            Expr::DnatPrefixMarkMap(id("dnat_endpoint")),
        ])],
    ));
    rs
}

/// `nft -j list table` without handles, elements sorted (hash maps list in an order of their
/// own).
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
async fn endpoint_maps_change_by_elements_and_list_like_a_fresh_apply() {
    let (inc, fresh) = (TestNs::new("epinc").await, TestNs::new("epfresh").await);
    let mut s = Session::open(Some(&inc.ns)).unwrap();
    let empty = ruleset(&[], &[]);
    assert_eq!(step(&mut s, &inc, &fresh, &empty), Applied::Replaced);
    let some = ruleset(
        &[("10.71.0.0/16", "10.51.0.0"), ("10.72.0.0/16", "10.51.0.0")],
        &[
            ("10.71.0.0/16", "10.51.0.1/32", "192.168.50.1/32"),
            ("10.72.0.0/16", "10.51.0.1/32", "192.168.50.1/32"),
            ("10.71.0.0/16", "10.51.3.2/32", "192.168.50.2/32"),
        ],
    );
    assert_eq!(
        step(&mut s, &inc, &fresh, &some),
        Applied::Elements {
            removed: 0,
            added: 5
        }
    );
    let text = String::from_utf8(inc.sh("nft", &["list", "table", "ip", "dpt_ep"]).stdout).unwrap();
    assert!(text.contains("0x0a470000 : 10.51.0.0"), "{text}");
    assert!(
        text.contains("0x0a470000 . 10.51.3.2 : 192.168.50.2/32"),
        "{text}"
    );
    // A value changes, an endpoint goes.
    let changed = ruleset(
        &[("10.71.0.0/16", "10.51.0.0"), ("10.72.0.0/16", "10.52.0.0")],
        &[
            ("10.71.0.0/16", "10.51.0.1/32", "192.168.50.1/32"),
            ("10.72.0.0/16", "10.51.0.1/32", "192.168.50.1/32"),
        ],
    );
    assert_eq!(
        step(&mut s, &inc, &fresh, &changed),
        Applied::Elements {
            removed: 2,
            added: 1
        }
    );
    // Emptied: no element left.
    assert_eq!(
        step(&mut s, &inc, &fresh, &empty),
        Applied::Elements {
            removed: 4,
            added: 0
        }
    );
    for map in ["snat_host", "dnat_endpoint"] {
        let out = inc.sh("nft", &["list", "map", "ip", "dpt_ep", map]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains("elements"), "{map}: {text}");
    }
}

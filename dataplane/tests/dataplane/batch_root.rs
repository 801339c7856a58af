//! Routes and rules reconciled in batches on the real kernel (needs root): thousands of routes in
//! a few `sendmsg`s, a refusal that names its route while the rest of the batch still lands,
//! dumps that see one table only, and a table changed from what was applied without a dump.

use crate::common;

use common::TestNs;
use dataplane::{
    IfName,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    route::{MAIN_TABLE, RouteSpec},
    rule::RuleSpec,
};

fn n(s: &str) -> IfName {
    s.parse().unwrap()
}

/// `count` routes `10.a.b.0/24` out of `dev` in `table`.
fn routes(count: usize, dev: &str, table: u32) -> Vec<RouteSpec> {
    (0..count)
        .map(|i| RouteSpec {
            dev: Some(n(dev)),
            table,
            ..RouteSpec::to(format!("10.{}.{}.0/24", i / 256, i % 256).parse().unwrap())
        })
        .collect()
}

async fn with_bridge(tag: &str) -> TestNs {
    let t = TestNs::new(tag).await;
    let nl = t.nl();
    nl.add_link(&LinkSpec {
        name: n("br0"),
        kind: LinkKind::Bridge,
        mtu: None,
        controller: None,
        up: true,
    })
    .await
    .unwrap();
    nl.add_address(&AddressSpec {
        link: n("br0"),
        addr: "192.168.7.1/24".parse().unwrap(),
    })
    .await
    .unwrap();
    t
}

#[tokio::test]
async fn thousands_of_routes_in_one_batch_and_back() {
    let t = with_bridge("many").await;
    let nl = t.nl();
    let other = RouteSpec {
        dev: Some(n("br0")),
        table: 18951,
        ..RouteSpec::to("10.250.0.0/16".parse().unwrap())
    };
    nl.add_route(&other).await.unwrap();
    let want = routes(3000, "br0", 18952);
    let d = nl.reconcile_table(18952, &want).await.unwrap();
    assert_eq!((d.add.len(), d.remove.len()), (3000, 0));
    let now = nl.routes(18952).await.unwrap();
    assert_eq!(now.len(), 3000);
    assert!(
        want.iter()
            .all(|w| now.iter().any(|c| w.is_satisfied_by(c)))
    );
    assert!(nl.reconcile_table(18952, &want).await.unwrap().is_empty());

    // One route moves to another device, one goes, one comes: three messages.
    let mut next = want.clone();
    next[5].via = Some("192.168.7.9".parse().unwrap());
    next.remove(7);
    next.push(RouteSpec {
        dev: Some(n("br0")),
        table: 18952,
        ..RouteSpec::to("10.200.0.0/24".parse().unwrap())
    });
    let d = nl.reconcile_table(18952, &next).await.unwrap();
    assert_eq!((d.add.len(), d.remove.len()), (2, 2), "{d:?}");
    assert!(nl.reconcile_table(18952, &next).await.unwrap().is_empty());

    let d = nl.reconcile_table(18952, &[]).await.unwrap();
    assert_eq!(d.remove.len(), 3000);
    assert!(nl.routes(18952).await.unwrap().is_empty());
    assert_eq!(
        nl.routes(18951).await.unwrap(),
        [RouteSpec { src: None, ..other }],
        "another table is neither dumped with it nor touched"
    );
    // A table that does not exist is empty, not an error.
    assert!(nl.routes(4242).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_names_its_route_and_the_rest_of_the_batch_lands() {
    let t = with_bridge("refuse").await;
    let nl = t.nl();
    let mut want = routes(50, "br0", 18952);
    // No address covers this next hop: the kernel refuses this one route.
    want[20].via = Some("203.0.113.1".parse().unwrap());
    let e = nl.reconcile_table(18952, &want).await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("add route 10.0.20.0/24 via 203.0.113.1 dev br0 table 18952"),
        "{text}"
    );
    assert_eq!(e.errno(), Some(libc::ENETUNREACH), "{text}");
    assert!(
        text.contains(": Nexthop has invalid gateway"),
        "the kernel's own words are kept: {text}"
    );
    let now = nl.routes(18952).await.unwrap();
    assert_eq!(now.len(), 49, "every other route of the batch was added");
    // The next reconcile computes what is left.
    want[20].via = None;
    let d = nl.reconcile_table(18952, &want).await.unwrap();
    assert_eq!((d.add.len(), d.remove.len()), (1, 0));

    // A device that does not exist is named before anything is sent.
    let e = nl
        .reconcile_table(18952, &routes(3, "nosuchdev", 18952))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "no link named nosuchdev");
    assert_eq!(nl.routes(18952).await.unwrap().len(), 50);
}

#[tokio::test]
async fn a_table_changes_from_what_was_applied_without_a_dump() {
    let t = with_bridge("change").await;
    let nl = t.nl();
    let first = routes(1000, "br0", 18952);
    nl.reconcile_table(18952, &first).await.unwrap();
    // One goes, one comes, one moves to another next hop: what a reconcile would send.
    let mut next = first.clone();
    next.remove(500);
    next.push(RouteSpec {
        dev: Some(n("br0")),
        table: 18952,
        ..RouteSpec::to("10.200.0.0/24".parse().unwrap())
    });
    next[3].via = Some("192.168.7.9".parse().unwrap());
    let d = nl.change_table(18952, &first, &next).await.unwrap();
    assert_eq!((d.add.len(), d.remove.len()), (2, 2), "{d:?}");
    assert!(nl.reconcile_table(18952, &next).await.unwrap().is_empty());
    assert!(
        nl.change_table(18952, &next, &next)
            .await
            .unwrap()
            .is_empty()
    );

    // Changed behind our back: a route the change deletes is gone already, one it adds is
    // there already (with another next hop): both end as wanted.
    let gone = next[10].clone();
    nl.delete_route(&gone).await.unwrap();
    let mut there = next[20].clone();
    there.dst = "10.201.0.0/24".parse().unwrap();
    let mut stale = there.clone();
    stale.via = Some("192.168.7.8".parse().unwrap());
    nl.add_route(&stale).await.unwrap();
    let mut last = next.clone();
    last.remove(10);
    last.push(there.clone());
    let d = nl.change_table(18952, &next, &last).await.unwrap();
    assert_eq!((d.add.len(), d.remove.len()), (1, 1), "{d:?}");
    let now = nl.routes(18952).await.unwrap();
    assert_eq!(now.len(), last.len());
    assert!(
        last.iter()
            .all(|w| now.iter().any(|c| w.is_satisfied_by(c)))
    );

    // A route of another table is refused before anything is sent.
    let mut other = last.clone();
    other.push(RouteSpec {
        dev: Some(n("br0")),
        table: 18951,
        ..RouteSpec::to("10.202.0.0/24".parse().unwrap())
    });
    let e = nl.change_table(18952, &last, &other).await.unwrap_err();
    assert!(e.to_string().contains("of another table"), "{e}");
    // A refusal other than a route already gone is the error, naming its route.
    let mut bad = last.clone();
    bad[30].via = Some("203.0.113.1".parse().unwrap());
    let e = nl.change_table(18952, &last, &bad).await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("replace route {}: ", bad[30])),
        "{e}"
    );
    assert_eq!(e.errno(), Some(libc::ENETUNREACH));
}

#[tokio::test]
async fn rules_reconcile_in_one_batch() {
    let t = TestNs::new("rules").await;
    let nl = t.nl();
    let rule = |to: Option<&str>| RuleSpec {
        priority: 18951,
        from: None,
        to: to.map(|t| t.parse().unwrap()),
        iif: None,
        fwmark: None,
        table: 18951,
        v6: false,
    };
    let many: Vec<RuleSpec> = (0..300)
        .map(|i| rule(Some(&format!("10.{}.{}.0/24", i / 256, i % 256))))
        .collect();
    assert_eq!(nl.reconcile_rules(18951, &many).await.unwrap(), (300, 0));
    let one = [rule(None)];
    assert_eq!(nl.reconcile_rules(18951, &one).await.unwrap(), (1, 300));
    let at: Vec<RuleSpec> = nl
        .rules()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.priority == 18951)
        .collect();
    assert_eq!(at, one);
    assert_eq!(nl.reconcile_rules(18951, &one).await.unwrap(), (0, 0));
    assert!(
        nl.rules()
            .await
            .unwrap()
            .iter()
            .any(|r| r.table == MAIN_TABLE),
        "the kernel's own rules are left alone"
    );
    assert_eq!(nl.reconcile_rules(18951, &[]).await.unwrap(), (0, 1));
}

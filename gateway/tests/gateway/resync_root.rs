//! The gateway converges its running config again (needs root): state changed behind its back
//! (routes, rules, NAT elements) comes back on the resync, a failing resync is shown until it applies; and a start that fails
//! leaves nothing behind.

use crate::common;

use std::{net::UdpSocket, time::Duration};

use common::{BIN, Site, Spaces, eventually, prefix};
use dataplane::supervisor::Spec;
use liqo_daemon::digest;

fn ip(site: &Site, args: &[&str]) -> String {
    let out = site.host.command("ip").args(args).output().unwrap();
    assert!(out.status.success(), "ip {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `liqo-gateway run` with `extra` arguments, as the site's process.
fn spec(site: &Site, extra: &[&str]) -> Spec {
    Spec::new("liqo-gateway", BIN, site.dir.join("gateway.log"))
        .args(["run", "--config"])
        .args([site.config_path()])
        .args(extra.iter().copied())
        .netns(&site.host)
        .truncate_log()
        .kill_on_drop()
}

#[tokio::test]
async fn a_route_deleted_by_hand_comes_back_on_the_resync() {
    let p = prefix("y");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    let b = Site::new(&mut spaces, &p, "b", &wan, "198.18.0.2/24").await;
    let running = a.configure(
        &b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16"),
        "",
    );
    a.child = Some(
        spec(&a, &["--resync-secs", "1"])
            .attached()
            .expect("starting liqo-gateway"),
    );
    a.wait_status("started", |s| s.reload.applied.is_some());
    let table = || ip(&a, &["route", "show", "table", "18951"]);
    let rules = || ip(&a, &["rule"]);
    assert!(table().contains("10.71.0.0/16"), "{}", table());
    let rule = rules()
        .lines()
        .find(|l| l.contains("lookup 18951"))
        .map(|l| l.split_once(':').unwrap().1.trim().to_owned())
        .expect("a host rule");

    // An admin deletes a route and a rule: both back within a few resyncs, nothing shown.
    ip(&a, &["route", "del", "10.71.0.0/16", "table", "18951"]);
    let del: Vec<&str> = ["rule", "del"]
        .into_iter()
        .chain(rule.split_whitespace())
        .collect();
    ip(&a, &del);
    assert!(!table().contains("10.71.0.0/16"));
    assert!(!rules().contains(&rule), "{}", rules());
    assert!(
        eventually(5, || table().contains("10.71.0.0/16")
            && rules().contains(&rule)),
        "not restored: {}\n{}\n{}",
        table(),
        rules(),
        a.log()
    );
    // An admin deletes a NAT element: the resync notices nftables changed and puts it back.
    let gw_ns = dataplane::Netns::open(&a.gw_ns.parse().unwrap()).unwrap();
    let nft = |args: &[&str]| {
        let out = gw_ns.command("nft").args(args).output().unwrap();
        assert!(out.status.success(), "nft {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // The peer's range 10.71.0.0/16 (its mark is its first address) sees our pods
    // (10.200.0.0/16) as 10.72.0.0/16.
    let snat = || nft(&["list", "map", "ip", "liqo_gateway", "snat_pod"]);
    let entry = "0x0a470000 . 10.200.0.0 : 10.72.0.0/16";
    assert!(snat().contains(entry), "{}", snat());
    nft(&[
        "delete",
        "element",
        "ip",
        "liqo_gateway",
        "snat_pod",
        "{ 0x0a470000 . 10.200.0.0 }",
    ]);
    assert!(!snat().contains(entry));
    assert!(
        eventually(5, || snat().contains(entry)),
        "not restored: {}\n{}",
        snat(),
        a.log()
    );
    let s = a.wait_status("clean", |s| s.reload.problem().is_none());
    let applied = s.reload.applied.unwrap();
    assert_eq!(
        (applied.digest, applied.count),
        (digest(&running), 1),
        "a resync is not a new config"
    );

    // A resync the kernel refuses (the routes' link is down): shown, retried, cleared once the
    // kernel takes it, with the routes back.
    ip(&a, &["link", "set", "liqo.host", "down"]);
    let s = a.wait_status("the resync failed", |s| {
        s.reload
            .apply_error
            .as_ref()
            .is_some_and(|f| f.digest == digest(&running) && f.attempts >= 2)
    });
    assert!(
        s.reload.apply_error.unwrap().error.contains("add route"),
        "{}",
        a.log()
    );
    ip(&a, &["link", "set", "liqo.host", "up"]);
    a.wait_status("the resync applied", |s| s.reload.problem().is_none());
    assert!(table().contains("10.71.0.0/16"), "{}", table());

    a.stop();
    drop(b);
}

#[tokio::test]
async fn a_start_that_fails_on_a_taken_port_leaves_nothing_behind() {
    let p = prefix("f");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    let b = Site::new(&mut spaces, &p, "b", &wan, "198.18.0.2/24").await;
    a.configure(
        &b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16"),
        "",
    );
    // Names, flags and MTU: the operational state of wan0 may still be
    // settling (UNKNOWN -> UP) while the test runs, and is not ours to compare.
    let links = || {
        ip(&a, &["-o", "link"])
            .lines()
            .map(|l| l.split(" state ").next().unwrap_or(l).to_owned() + "\n")
            .collect::<String>()
    };
    let before = (links(), ip(&a, &["rule"]));
    // Someone else holds the gateway's UDP port in its namespace.
    let taken = a
        .host
        .run(|| UdpSocket::bind(("0.0.0.0", 51840)))
        .unwrap()
        .unwrap();

    let mut child = spec(&a, &[]).attached().expect("starting liqo-gateway");
    let status = child
        .wait_exit(Duration::from_secs(20))
        .unwrap()
        .unwrap_or_else(|| panic!("the gateway did not exit: {}", a.log()));
    assert!(!status.success(), "{status}: {}", a.log());
    let log = a.log();
    assert!(
        log.contains("error:")
            && log.contains("0.0.0.0:51840")
            && log.contains("Address already in use"),
        "{log}"
    );

    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(netns.status.success(), "{netns:?}");
    let netns = String::from_utf8(netns.stdout).unwrap();
    assert!(
        !netns
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&a.gw_ns)),
        "its namespace {} is left: {netns}",
        a.gw_ns
    );
    assert!(!links().contains("liqo.host"), "{}", links());
    assert_eq!((links(), ip(&a, &["rule"])), before, "links and rules");
    let table = a
        .host
        .command("ip")
        .args(["route", "show", "table", "18951"])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&table.stdout),
        String::from_utf8_lossy(&table.stderr),
    );
    // Empty, or (newer iproute2) the table does not exist at all.
    assert!(
        out.is_empty() && (table.status.success() || err.contains("does not exist")),
        "{table:?}"
    );
    drop((taken, child));
    drop(b);
}

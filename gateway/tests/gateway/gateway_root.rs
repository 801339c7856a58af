//! The gateway on the real kernel (needs root): two and three sites over a WAN bridge, all
//! using pod CIDR 10.200.0.0/16, translated through each other's views.

use crate::common;

use common::{Site, Spaces, eventually, iperf, prefix, tcp_seen};

/// Sites a and b: a sees b's pods as 10.71/16, b sees a's as 10.72/16.
async fn two_sites(tag: &str) -> (Spaces, Site, Site) {
    let mut spaces = Spaces::new();
    let (_wan, a, mut spokes) = common::hub::hub(&mut spaces, &prefix(tag), 1).await;
    let b = spokes.pop().expect("one spoke");
    (spaces, a, b)
}

fn counts(site: &Site) -> (usize, usize, usize) {
    let out = |args: &[&str]| {
        String::from_utf8(site.host.command("ip").args(args).output().unwrap().stdout).unwrap()
    };
    (
        out(&["rule"])
            .lines()
            .filter(|l| l.contains("lookup 18951"))
            .count(),
        out(&["route", "show", "table", "18951"]).lines().count(),
        out(&["-br", "link"])
            .lines()
            .filter(|l| l.starts_with("liqo."))
            .count(),
    )
}

#[tokio::test]
async fn pods_with_the_same_cidr_talk_through_their_views() {
    let (_spaces, a, b) = two_sites("v").await;
    assert!(
        a.ping("10.71.0.2"),
        "a's pod reaches b's pod at a's view of it\n{}",
        a.log()
    );
    assert!(b.ping("10.72.0.2"), "and back");
    assert_eq!(
        tcp_seen(&a, &b, "10.71.0.2", 7001),
        "10.72.0.2",
        "b sees a's pod in b's view of a"
    );
    assert_eq!(
        tcp_seen(&b, &a, "10.72.0.2", 7002),
        "10.71.0.2",
        "a sees b's pod in a's view of b"
    );
    let s = a.status_json().unwrap();
    let peer = &s["peers"][0];
    assert_eq!(peer["id"], "b");
    assert!(peer["handshakeAgeSecs"].as_u64().is_some(), "{s}");
    assert!(peer["rxPackets"].as_u64().unwrap() >= 3);
}

#[tokio::test]
async fn sigterm_removes_everything_and_kill9_restart_converges() {
    let (_spaces, mut a, b) = two_sites("c").await;
    assert!(a.ping("10.71.0.2"));
    let before = counts(&a);
    assert_eq!(before, (1, 1, 1), "one rule, one route, one veth end");
    a.kill9();
    a.start();
    assert_eq!(
        counts(&a),
        before,
        "restart after kill -9: same state, no duplicates"
    );
    assert!(
        eventually(10, || a.ping("10.71.0.2")),
        "traffic resumes\n{}",
        a.log()
    );
    a.stop();
    assert_eq!(
        counts(&a),
        (0, 0, 0),
        "SIGTERM removed rules, routes and links"
    );
    assert!(
        dataplane::Netns::open(&a.gw_ns.parse().unwrap()).is_err(),
        "and the gateway namespace"
    );
    drop(b);
}

#[tokio::test]
async fn reload_adds_and_removes_a_peer_and_refuses_bad_config() {
    let (mut spaces, a, mut b) = two_sites("r").await;
    let wan = dataplane::Netns::open(&spaces.names[0]).unwrap();
    let p = spaces.names[0].as_str().trim_end_matches("-wan").to_owned();
    let mut c = Site::new(&mut spaces, &p, "c", &wan, "198.18.0.3/24").await;
    c.configure(
        &a.as_peer(Some("198.18.0.1:51840"), "10.82.0.0/16", "10.81.0.0/16"),
        "",
    );
    c.start();
    assert!(a.ping("10.71.0.2"));
    let b_entry = b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16");
    let c_entry = c.as_peer(Some("198.18.0.3:51840"), "10.81.0.0/16", "10.82.0.0/16");
    a.configure(&format!("{b_entry}{c_entry}"), "");
    assert!(
        eventually(10, || a.ping("10.81.0.2")),
        "the added peer works\n{}",
        a.log()
    );
    assert_eq!(tcp_seen(&c, &a, "10.82.0.2", 7003), "10.81.0.2");
    assert!(a.ping("10.71.0.2"), "the first peer is untouched");

    // A bad value: refused, named, and nothing changes.
    a.configure(
        &format!(
            "{b_entry}{}",
            c_entry.replace("10.81.0.0/16", "10.71.128.0/17")
        ),
        "",
    );
    assert!(
        eventually(5, || a.status_json().unwrap()["reload"]["refused"]["field"]
            == "peers[1].remotePodCIDR"),
        "{}",
        a.status_json().unwrap()
    );
    assert!(
        a.ping("10.81.0.2") && a.ping("10.71.0.2"),
        "running state kept"
    );

    a.configure(&b_entry, "");
    assert!(
        eventually(5, || !a.ping("10.81.0.2")),
        "the removed peer is gone"
    );
    assert!(a.ping("10.71.0.2"));
    // The kernel state goes first, then the peer table: the status follows within the reload.
    assert!(
        eventually(5, || a.status_json().unwrap()["peers"]
            .as_array()
            .unwrap()
            .len()
            == 1),
        "{}",
        a.status_json().unwrap()
    );
    c.stop();
    b.stop();
}

#[tokio::test]
async fn adding_and_removing_a_peer_never_stalls_another() {
    let (mut spaces, a, b) = two_sites("i").await;
    let wan = dataplane::Netns::open(&spaces.names[0]).unwrap();
    let p = spaces.names[0].as_str().trim_end_matches("-wan").to_owned();
    let mut c = Site::new(&mut spaces, &p, "c", &wan, "198.18.0.3/24").await;
    c.configure(
        &a.as_peer(Some("198.18.0.1:51840"), "10.82.0.0/16", "10.81.0.0/16"),
        "",
    );
    c.start();
    assert!(a.ping("10.71.0.2"));
    let _server = iperf::Server::start(&b.pod, "10.200.0.2", b.dir.join("iperf3.log"));
    let client = iperf::Client::start(&a.pod, "10.71.0.2", 6, 0.5);
    let b_entry = b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16");
    let c_entry = c.as_peer(Some("198.18.0.3:51840"), "10.81.0.0/16", "10.82.0.0/16");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    a.configure(&format!("{b_entry}{c_entry}"), "");
    assert!(
        eventually(3, || a.ping("10.81.0.2")),
        "c added during the run\n{}\n{}\n{}",
        a.status_json().unwrap(),
        a.log(),
        c.log()
    );
    std::thread::sleep(std::time::Duration::from_millis(1000));
    a.configure(&b_entry, "");
    assert!(
        eventually(3, || a.status_json().unwrap()["peers"]
            .as_array()
            .unwrap()
            .len()
            == 1),
        "c removed during the run"
    );
    let rates = client.rates();
    assert!(rates.len() >= 10, "{rates:?}");
    assert!(
        rates.iter().all(|r| *r > 0.0),
        "an interval with zero throughput: {rates:?}"
    );
    eprintln!(
        "throughput per 0.5 s interval while c was added and removed (Mbit/s): {:?}",
        iperf::mbit(&rates)
    );
    c.stop();
}

//! A hub gateway with 1,000 peers that have no endpoint (needs root): they wait to be called, so
//! nothing is sent to them and the log stays short. And a hub that gains hundreds of peers with
//! endpoints calls each once, paced rather than in one burst.

use crate::common;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use common::{Site, Spaces, capture::Capture, prefix};

const PEERS: usize = 1000;

/// The address of a peer with an endpoint, added at the end to show the capture sees what the
/// gateway sends.
const CONTROL: [u8; 4] = [198, 18, 0, 99];

/// Datagrams captured: to [`CONTROL`], and to anywhere else.
#[derive(Default)]
struct Sent {
    control: AtomicU64,
    elsewhere: AtomicU64,
}

/// Counts the IPv4 UDP datagrams `wan0` of `site`'s host sends from the gateway's port into
/// `sent`.
fn capture(site: &Site, sent: Arc<Sent>) -> Capture {
    Capture::start(&site.host, "wan0", move |d| {
        if d.outgoing && d.src.port() == 51840 {
            if d.dst.ip().octets() == CONTROL {
                sent.control.fetch_add(1, Ordering::Relaxed);
            } else {
                sent.elsewhere.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

fn wan_tx_packets(site: &Site) -> u64 {
    let out = site
        .host
        .command("ip")
        .args(["-j", "-s", "link", "show", "wan0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["stats64"]["tx"]["packets"].as_u64().unwrap()
}

#[tokio::test]
async fn a_thousand_endpointless_peers_send_nothing_and_log_little() {
    let p = prefix("idle");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    // No IPv6 chatter (router solicitations) on the WAN link: its tx counter counts only us.
    a.host
        .run(|| dataplane::sysctl::set("net.ipv6.conf.wan0.disable_ipv6", "1"))
        .unwrap()
        .unwrap();
    // A keepalive of 1 s: the old code started its first futile handshakes after 1 s and
    // logged their retries 5 s later.
    let idle = common::endpointless_peers(PEERS);
    a.configure(&idle, "keepalive: 1\n");
    let sent = Arc::new(Sent::default());
    let captured = capture(&a, Arc::clone(&sent));
    a.start();
    a.wait_status("all peers applied", |s| s.peers.len() == PEERS);
    let tx_before = wan_tx_packets(&a);
    // Traffic for a few of them: it must not start a handshake either.
    for ip in ["10.1.0.1", "10.2.7.1", "10.4.231.1"] {
        assert!(!a.ping(ip), "{ip} has nobody to answer");
    }
    thread::sleep(Duration::from_secs(7));
    let tx_after = wan_tx_packets(&a);
    let sent_idle = sent.elsewhere.load(Ordering::Relaxed);

    let s = a.status().expect("status");
    let log = a.log();
    let lines = log.lines().count();
    eprintln!(
        "{PEERS} endpointless peers: wan0 tx {tx_before} -> {tx_after}, {sent_idle} datagram(s) \
         from port 51840 captured, {lines} log line(s)"
    );
    assert_eq!(s.peers.len(), PEERS);
    let pinged = ["idle-0", "idle-263", "idle-999"];
    let mut dropped = 0;
    for peer in &s.peers {
        assert_eq!(peer.endpoint, None, "{peer:?}");
        assert_eq!(peer.handshake_age_secs, None, "{peer:?}");
        assert_eq!((peer.tx_packets, peer.tx_bytes), (0, 0), "{peer:?}");
        if pinged.contains(&peer.id.as_str()) {
            dropped += peer.dropped;
        } else {
            assert_eq!(peer.dropped, 0, "no initiation was built for it: {peer:?}");
        }
    }
    assert!(
        dropped >= 3,
        "the pings reached the gateway and were dropped there: {s:#?}"
    );
    assert_eq!(sent_idle, 0, "no datagram left the gateway's port");
    assert_eq!(tx_after, tx_before, "wan0 sent nothing");
    assert!(lines < 100, "{lines} log lines:\n{log}");

    // The instruments work: a peer with an endpoint (its MAC pinned, so no ARP is needed) is
    // sent an initiation at once, and both the capture and the counter see it.
    pin_control_mac(&a);
    let ip = CONTROL.map(|b| b.to_string()).join(".");
    let control = format!(
        "  - id: control\n    publicKey: {}\n    endpoint: {ip}:51840\n    remotePodCIDR: 10.99.0.0/24\n    localPodCIDRAtPeer: 10.72.0.0/16\n",
        gateway::keys::PrivateKey::generate().unwrap().public()
    );
    a.configure(&format!("{idle}{control}"), "keepalive: 1\n");
    assert!(
        common::eventually(10, || sent.control.load(Ordering::Relaxed) > 0),
        "the capture saw the control peer's initiation\n{}",
        a.log()
    );
    assert!(wan_tx_packets(&a) > tx_after, "and wan0's counter");
    captured.stop();
    a.stop();
}

/// A peer with an endpoint at [`CONTROL`] (its MAC pinned on `site`'s WAN link, so no ARP is
/// needed), one per line of a config's peer list.
fn peers_at_control(n: usize) -> String {
    (0..n)
        .map(|i| {
            let key = gateway::keys::PrivateKey::generate().unwrap().public();
            format!(
                "  - id: called-{i}\n    publicKey: {key}\n    endpoint: {}:51840\n    remotePodCIDR: 10.{}.{}.0/24\n    localPodCIDRAtPeer: 10.72.0.0/16\n",
                CONTROL.map(|b| b.to_string()).join("."),
                1 + i / 256,
                i % 256
            )
        })
        .collect()
}

fn pin_control_mac(site: &Site) {
    let ip = CONTROL.map(|b| b.to_string()).join(".");
    let neigh = site
        .host
        .command("ip")
        .args([
            "neigh",
            "replace",
            &ip,
            "lladdr",
            "02:00:00:00:00:99",
            "dev",
            "wan0",
        ])
        .status()
        .unwrap();
    assert!(neigh.success());
}

#[tokio::test]
async fn hundreds_of_new_peers_are_each_called_once_and_paced() {
    const CALLED: usize = 300;
    let p = prefix("call");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    pin_control_mac(&a);
    // Handshake initiations (type 1) to CONTROL, by the peer's receiver index, with when each
    // peer was first called and how often.
    let seen: Arc<Mutex<HashMap<u32, (Instant, u32)>>> = Arc::default();
    let s2 = Arc::clone(&seen);
    let captured = Capture::start(&a.host, "wan0", move |d| {
        if d.outgoing
            && d.dst.ip().octets() == CONTROL
            && d.payload.len() == 148
            && d.payload[0] == 1
        {
            // boringtun puts a fresh byte under the peer's 24-bit index in every initiation.
            let sender =
                u32::from_le_bytes([d.payload[4], d.payload[5], d.payload[6], d.payload[7]]) >> 8;
            let mut m = s2.lock().unwrap();
            m.entry(sender).or_insert((Instant::now(), 0)).1 += 1;
        }
    });
    a.configure("", "");
    a.start();
    a.wait_status("started", |s| s.peers.is_empty());
    a.configure(&peers_at_control(CALLED), "");
    assert!(
        common::eventually(20, || seen.lock().unwrap().len() >= CALLED),
        "{} of {CALLED} peers called\n{}",
        seen.lock().unwrap().len(),
        a.log()
    );
    captured.stop();
    let m = seen.lock().unwrap();
    let first = m.values().map(|(t, _)| *t).min().unwrap();
    let last = m.values().map(|(t, _)| *t).max().unwrap();
    let spread = last - first;
    eprintln!("{} peers called over {spread:?}", m.len());
    assert_eq!(m.len(), CALLED, "one receiver index per peer");
    // Each called once: its retry timer (5 s) has not fired yet.
    assert!(m.values().all(|(_, n)| *n == 1), "{m:?}");
    // 50 at once, then 50 per 100 ms tick: five more ticks, the first of which may come at once.
    assert!(
        spread >= Duration::from_millis(350),
        "not paced: {spread:?}"
    );
    a.stop();
}

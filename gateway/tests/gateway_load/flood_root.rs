//! A handshake flood against a gateway (needs root): from one address on the WAN, an attacker who
//! knows the gateway's public key sends 20,000 handshake initiations a second, answers the
//! gateway's cookie reply and from then on puts a valid mac2 on every one. The gateway limits
//! that source; a stream through it keeps at least half its throughput and another peer's fresh
//! handshake still completes.

use crate::common;

use std::{
    net::{IpAddr, Ipv4Addr, UdpSocket},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use boringtun::noise::{Packet, TunnResult, errors::WireGuardError, rate_limiter::RateLimiter};
use common::{
    Spaces, counter, eventually,
    forge::{COOKIE_REPLY_LEN, Cookie, INIT_LEN, Pacer, Responder, Rng, receiver, set_mac2},
    iperf, peer_status, prefix,
};
use dataplane::Netns;

/// Initiations per second.
const RATE: u64 = 20_000;
/// The attacker's address: on the WAN, not a peer's.
const ATTACKER: &str = "198.18.0.66";

/// The forge against boringtun's own checks: a rate limiter that is always under load refuses a
/// bad mac1, answers a good one with a cookie reply that opens with the initiation's mac1, and
/// accepts the mac2 made from that cookie, from that address only.
#[test]
fn forged_initiations_pass_boringtuns_own_mac_checks() {
    let key = gateway::keys::PrivateKey::generate().unwrap().public();
    let limiter = RateLimiter::new(&gateway::keys::x25519(&key), 0);
    let who = Responder::new(key.as_bytes());
    let mut rng = Rng::new(1);
    let from = Some(IpAddr::V4(ATTACKER.parse().unwrap()));
    let mut out = [0u8; 256];

    let mut bad = who.initiation(7, &mut rng, None);
    bad[120] ^= 1;
    let r = limiter.verify_packet(from, &bad, &mut out);
    assert!(
        matches!(r, Err(TunnResult::Err(WireGuardError::InvalidMac))),
        "{r:?}"
    );

    let init = who.initiation(7, &mut rng, None);
    let reply = match limiter.verify_packet(from, &init, &mut out) {
        Err(TunnResult::WriteToNetwork(r)) => r.to_vec(),
        other => panic!("a cookie reply, not {other:?}"),
    };
    assert_eq!((reply.len(), reply[0]), (COOKIE_REPLY_LEN, 3));
    assert_eq!(receiver(&reply), Some(7), "it answers sender 7");
    let cookie = who
        .open_cookie(&reply, &who.mac1(&init))
        .expect("the cookie opens with the mac1 it answers");
    assert_eq!(who.open_cookie(&reply, &[0; 16]), None, "and with no other");

    let with_mac2 = who.initiation(8, &mut rng, Some(&cookie));
    let r = limiter.verify_packet(from, &with_mac2, &mut out);
    assert!(matches!(r, Ok(Packet::HandshakeInit(_))), "{r:?}");
    let elsewhere = Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 67)));
    let r = limiter.verify_packet(elsewhere, &with_mac2, &mut out);
    assert!(
        matches!(r, Err(TunnResult::WriteToNetwork(_))),
        "the cookie is bound to the address: {r:?}"
    );
}

/// Distinct initiations the flood cycles through (built once: the sender only sends).
const POOL: usize = 4096;

/// What the flood's threads share.
struct Shared {
    who: Responder,
    /// Initiation `i` of the pool (sender index `i`): its body and mac1.
    pool: Vec<[u8; INIT_LEN]>,
    cookie: Mutex<Option<Cookie>>,
    sent: AtomicU64,
    sent_mac2: AtomicU64,
    send_errors: AtomicU64,
    /// When the first initiation with a mac2 went out.
    mac2_since: Mutex<Option<Instant>>,
    replies: AtomicU64,
    unopened: AtomicU64,
    stop: AtomicBool,
}

/// A running flood: a sender thread and a thread reading the cookie replies.
struct Flood {
    shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
    started: Instant,
    seed: u64,
}

/// What a flood did.
#[derive(Debug)]
struct Report {
    seed: u64,
    secs: f64,
    sent: u64,
    sent_mac2: u64,
    mac2_secs: f64,
    send_errors: u64,
    replies: u64,
    unopened: u64,
}

impl Flood {
    /// Floods `target` from a socket in `ns`.
    fn start(ns: &Netns, target: &str, who: Responder) -> Flood {
        let target = target.to_owned();
        let sock = ns
            .run(move || -> std::io::Result<UdpSocket> {
                let s = UdpSocket::bind((ATTACKER, 0))?;
                s.connect(target)?;
                s.set_read_timeout(Some(Duration::from_millis(50)))?;
                Ok(s)
            })
            .unwrap()
            .expect("the attacker's socket");
        let seed = Rng::seed();
        let mut rng = Rng::new(seed);
        let pool = (0..POOL as u32)
            .map(|i| who.initiation(i, &mut rng, None))
            .collect();
        let shared = Arc::new(Shared {
            who,
            pool,
            cookie: Mutex::default(),
            sent: AtomicU64::default(),
            sent_mac2: AtomicU64::default(),
            send_errors: AtomicU64::default(),
            mac2_since: Mutex::default(),
            replies: AtomicU64::default(),
            unopened: AtomicU64::default(),
            stop: AtomicBool::default(),
        });
        let tx = sock.try_clone().unwrap();
        let (s1, s2) = (Arc::clone(&shared), Arc::clone(&shared));
        let threads = vec![
            thread::spawn(move || send(&tx, &s1)),
            thread::spawn(move || read_cookies(&sock, &s2)),
        ];
        Flood {
            shared,
            threads,
            started: Instant::now(),
            seed,
        }
    }

    /// Waits up to `secs` for a cookie; how long it took.
    fn wait_cookie(&self, secs: u64) -> Option<Duration> {
        let cookie = || self.shared.cookie.lock().unwrap().is_some();
        eventually(secs, cookie).then(|| self.started.elapsed())
    }

    fn stop(mut self) -> Report {
        let sh = &self.shared;
        sh.stop.store(true, Ordering::Relaxed);
        let now = Instant::now();
        for t in self.threads.drain(..) {
            t.join().expect("a flood thread");
        }
        let since = *sh.mac2_since.lock().unwrap();
        Report {
            seed: self.seed,
            secs: (now - self.started).as_secs_f64(),
            sent: sh.sent.load(Ordering::Relaxed),
            sent_mac2: sh.sent_mac2.load(Ordering::Relaxed),
            mac2_secs: since.map_or(0.0, |s| (now - s).as_secs_f64()),
            send_errors: sh.send_errors.load(Ordering::Relaxed),
            replies: sh.replies.load(Ordering::Relaxed),
            unopened: sh.unopened.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // Dropped without `stop`: the test is failing already; a thread's panic was printed.
            drop(t.join());
        }
    }
}

/// Sends initiations at [`RATE`], with a mac2 once a cookie is known.
fn send(sock: &UdpSocket, sh: &Shared) {
    let mut pool = sh.pool.clone();
    let mut applied: Option<Cookie> = None;
    let mut pacer = Pacer::new(RATE);
    let mut next = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        let n = pacer.due();
        let cookie = *sh.cookie.lock().unwrap();
        if cookie != applied
            && let Some(c) = &cookie
        {
            pool.iter_mut().for_each(|m| set_mac2(m, c));
            applied = cookie;
        }
        let mut sent = 0;
        for _ in 0..n {
            match sock.send(&pool[next]) {
                Ok(_) => sent += 1,
                Err(_) => {
                    sh.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            next = (next + 1) % POOL;
        }
        sh.sent.fetch_add(sent, Ordering::Relaxed);
        if applied.is_some() {
            sh.sent_mac2.fetch_add(sent, Ordering::Relaxed);
            sh.mac2_since
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
        }
    }
}

/// Reads the gateway's cookie replies and keeps the newest cookie.
fn read_cookies(sock: &UdpSocket, sh: &Shared) {
    let mut buf = [0u8; 2048];
    while !sh.stop.load(Ordering::Relaxed) {
        let Ok(n) = sock.recv(&mut buf) else {
            continue; // a timeout: check `stop`
        };
        let reply = &buf[..n];
        let Some(index) = receiver(reply).filter(|_| n == COOKIE_REPLY_LEN && reply[0] == 3) else {
            continue;
        };
        sh.replies.fetch_add(1, Ordering::Relaxed);
        let Some(init) = sh.pool.get(index as usize) else {
            sh.unopened.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        match sh.who.open_cookie(reply, &sh.who.mac1(init)) {
            Some(c) => *sh.cookie.lock().unwrap() = Some(c),
            None => {
                sh.unopened.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[tokio::test]
async fn a_cookie_answering_flood_from_one_address_stalls_neither_data_nor_handshakes() {
    let _one = crate::MACHINE.lock().await;
    let p = prefix("flood");
    let mut spaces = Spaces::new();
    let (wan, mut a, mut spokes) = common::hub::hub(&mut spaces, &p, 2).await;
    let attacker =
        common::hub::outsider(&mut spaces, &p, "x", &wan, &format!("{ATTACKER}/24")).await;
    let mut c = spokes.pop().expect("c");
    let b = spokes.pop().expect("b");
    assert!(
        eventually(10, || b.ping("10.72.0.2")),
        "b's pod reaches a's\n{}",
        a.log()
    );
    assert!(eventually(10, || c.ping("10.82.0.2")), "c's too");
    let pid = a.pid();
    let _server = iperf::Server::start(&a.pod, "10.200.0.2", a.dir.join("iperf3.log"));
    let baseline = iperf::Client::start(&b.pod, "10.72.0.2", 5, 1.0).rates();
    let wire_before = a.status_json().expect("a's status")["wire"].clone();

    let key: gateway::keys::PublicKey = a.key.parse().unwrap();
    let flood = Flood::start(
        &attacker,
        "198.18.0.1:51840",
        Responder::new(key.as_bytes()),
    );
    let cookie_after = flood.wait_cookie(10);
    let run = iperf::Client::start(&b.pod, "10.72.0.2", 10, 1.0).finish();
    // Still under the flood, c's fresh handshake: a new process initiates at once; under load a
    // answers with a cookie reply, and c retries with a mac2 after 5 s. (After the stream: the
    // restart's own work on this machine is no part of what the stream measures.)
    c.kill9();
    c.start();
    let restarted = Instant::now();
    let rekeyed = eventually(20, || c.ping("10.82.0.2")).then(|| restarted.elapsed());
    let since_restart = restarted.elapsed().as_secs();
    let a_status = a.status_json().expect("a's status");
    let a_age_of_c = peer_status(&a_status, "c")["handshakeAgeSecs"].as_u64();
    let c_age = c.status_json().expect("c's status")["peers"][0]["handshakeAgeSecs"].as_u64();
    let report = flood.stop();
    // What is still queued at a is counted once it is read.
    thread::sleep(Duration::from_millis(500));
    let a_after = a.status_json();
    let alive = a.alive();

    let base = iperf::median(&baseline);
    // The lowest interval of the run under the flood, as a share of the baseline's median.
    let lowest = run.as_deref().ok().map(|r| {
        let low = r.iter().copied().fold(f64::INFINITY, f64::min);
        (low / base * 100.0).round()
    });
    let mac2_rate = report.sent_mac2 as f64 / report.mac2_secs.max(1e-9);
    eprintln!(
        "flood (seed {}): {} initiations in {:.1} s ({:.0}/s), {} with mac2 in {:.1} s ({mac2_rate:.0}/s), \
         {} send errors; cookie after {cookie_after:?}; {} cookie replies ({} did not open)",
        report.seed,
        report.sent,
        report.secs,
        report.sent as f64 / report.secs,
        report.sent_mac2,
        report.mac2_secs,
        report.send_errors,
        report.replies,
        report.unopened
    );
    eprintln!(
        "throughput b -> a (Mbit/s): baseline {:?} (median {:.0}), during the flood {:?} (lowest: {lowest:?} % of the median)",
        iperf::mbit(&baseline),
        base / 1e6,
        run.as_deref().map(iperf::mbit),
    );
    eprintln!(
        "c's fresh handshake: ping after {rekeyed:?}; handshake age at c {c_age:?} s, at a {a_age_of_c:?} s \
         ({since_restart} s after the restart)"
    );
    eprintln!(
        "a: pid {pid}, running {alive}; wire before {wire_before}, after {}",
        a_after
            .as_ref()
            .map_or(serde_json::Value::Null, |s| s["wire"].clone())
    );

    assert!(
        cookie_after.is_some() && report.replies > 0,
        "a answered with cookies"
    );
    assert!(
        mac2_rate >= 15_000.0,
        "the sender reached {mac2_rate:.0}/s: {report:?}"
    );
    assert!(
        alive && a.pid() == pid,
        "a's gateway still runs\n{}",
        a.log()
    );
    let a_after = a_after.expect("a still answers");
    assert!(baseline.len() >= 4, "baseline: {baseline:?}");
    let rates = run.expect("the stream ran through the flood");
    assert!(rates.len() >= 9, "{rates:?}");
    assert!(
        rates.iter().all(|r| *r >= base / 2.0),
        "an interval below half the baseline median: {:?} against {:.0}",
        iperf::mbit(&rates),
        base / 1e6
    );
    assert!(
        rekeyed.is_some(),
        "c's fresh handshake completed\n{}",
        c.log()
    );
    assert!(
        c_age.is_some_and(|s| s <= since_restart),
        "c's handshake is new: {c_age:?}"
    );
    assert!(
        a_age_of_c.is_some_and(|s| s <= since_restart),
        "a's handshake with c is new: {a_status:#}"
    );
    let limited = counter(&a_after, &["wire", "handshakesLimited"])
        - wire_before["handshakesLimited"].as_u64().unwrap_or(0);
    assert!(
        limited * 2 >= report.sent_mac2,
        "a limited {limited} of the {} initiations with mac2",
        report.sent_mac2
    );
    drop(b);
}

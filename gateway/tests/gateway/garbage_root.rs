//! Garbage against a gateway (needs root): from a stranger on the WAN, random datagrams; for each
//! WireGuard message type, random ones of the right size, truncated and oversized; data
//! messages forged with the live receiver index of a session; and replays of that session's real
//! data messages, from the stranger's address and spoofed from the peer's own. During an iperf3
//! run the gateway keeps its process, its memory, its stream and the peer's endpoint; the peer's
//! own `dropped` stays put while its `rejected` and the gateway's `invalid` count the garbage.

use crate::common;

use std::{
    collections::BTreeMap,
    net::{SocketAddr, UdpSocket},
    sync::{Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use common::{
    Spaces,
    capture::Capture,
    counter, eventually,
    forge::{COOKIE_REPLY_LEN, DATA_MIN_LEN, INIT_LEN, Pacer, RESPONSE_LEN, Rng, is_data},
    iperf, peer_status, prefix,
};
use dataplane::Netns;

/// The stranger's address.
const ATTACKER: &str = "198.18.0.66";
/// Where b's gateway sends from, and where a's listens.
const B: &str = "198.18.0.2:51840";
const A: &str = "198.18.0.1:51840";
/// Datagrams sent per second.
const RATE: u64 = 5_000;
/// Real data messages from b to keep for replaying.
const KEEP: usize = 3_000;

/// What is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// Random bytes, 1 to 1,400 of them.
    Random,
    /// Message type `t` at its size (data: 32 + 16n), random after the type (reserved bytes
    /// zero); receiver indices random.
    Sized(u8),
    /// Shorter than type `t`'s size.
    Truncated(u8),
    /// Longer than type `t`'s size (up to 2,000 bytes); a data message from 1,501 bytes to the
    /// largest UDP datagram.
    Oversized(u8),
    /// A data message with the live receiver index of a's session with b and random counter and
    /// payload.
    Forged,
    /// A real data message from b, again, from the stranger's address.
    Replayed,
    /// The same, spoofed from b's own address and port.
    Spoofed,
}

/// How many of each.
fn plan() -> Vec<(Kind, usize)> {
    let mut p = vec![(Kind::Random, 3_000)];
    for t in 1..=4 {
        p.push((Kind::Sized(t), 1_000));
        p.push((Kind::Truncated(t), 1_000));
        p.push((Kind::Oversized(t), if t == 4 { 500 } else { 1_000 }));
    }
    p.extend([
        (Kind::Forged, 3_000),
        (Kind::Replayed, 3_000),
        (Kind::Spoofed, 3_000),
    ]);
    p
}

/// The size of message type `t` (the smallest, for data).
fn size(t: u8) -> usize {
    [INIT_LEN, RESPONSE_LEN, COOKIE_REPLY_LEN, DATA_MIN_LEN][usize::from(t - 1)]
}

/// A message of type `t`, `len` bytes, random after the type: reserved bytes zero, and a
/// receiver index other than `live`.
fn typed(rng: &mut Rng, t: u8, len: usize, live: [u8; 4]) -> Vec<u8> {
    let mut m = rng.bytes(len);
    m[0] = t;
    let reserved = len.min(4);
    m[1..reserved].fill(0);
    if m.get(4..8) == Some(&live[..]) {
        m[4] ^= 1;
    }
    m
}

fn datagram(rng: &mut Rng, kind: Kind, live: [u8; 4], replays: &[Vec<u8>], n: usize) -> Vec<u8> {
    match kind {
        Kind::Random => {
            let len = rng.between(1, 1_400);
            rng.bytes(len)
        }
        Kind::Sized(4) => {
            let len = DATA_MIN_LEN + 16 * rng.between(0, 90);
            typed(rng, 4, len, live)
        }
        Kind::Sized(t) => typed(rng, t, size(t), live),
        Kind::Truncated(t) => {
            let len = rng.between(1, size(t) - 1);
            typed(rng, t, len, live)
        }
        Kind::Oversized(4) => {
            let len = rng.between(1_501, 65_507);
            typed(rng, 4, len, live)
        }
        Kind::Oversized(t) => {
            let len = rng.between(size(t) + 1, 2_000);
            typed(rng, t, len, live)
        }
        Kind::Forged => {
            let len = DATA_MIN_LEN + 16 * rng.between(1, 90);
            let mut m = rng.bytes(len);
            m[..4].copy_from_slice(&[4, 0, 0, 0]);
            m[4..8].copy_from_slice(&live);
            m
        }
        Kind::Replayed | Kind::Spoofed => replays[n % replays.len()].clone(),
    }
}

/// Sends the [`plan`], shuffled, at [`RATE`]; what was sent of each kind.
fn attack(
    rng: &mut Rng,
    plain: &UdpSocket,
    spoofed: &UdpSocket,
    live: [u8; 4],
    replays: &[Vec<u8>],
) -> BTreeMap<Kind, u64> {
    let mut order: Vec<Kind> = plan()
        .into_iter()
        .flat_map(|(k, n)| std::iter::repeat_n(k, n))
        .collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.between(0, i));
    }
    let a: SocketAddr = A.parse().unwrap();
    let mut sent: BTreeMap<Kind, u64> = BTreeMap::new();
    let mut pacer = Pacer::new(RATE);
    let mut next = order.iter().enumerate();
    loop {
        for _ in 0..pacer.due() {
            let Some((n, &kind)) = next.next() else {
                return sent;
            };
            let d = datagram(rng, kind, live, replays, n);
            let sock = if kind == Kind::Spoofed {
                spoofed
            } else {
                plain
            };
            match sock.send_to(&d, a) {
                Ok(_) => *sent.entry(kind).or_default() += 1,
                Err(e) => eprintln!("sending a {kind:?} of {} bytes: {e}", d.len()),
            }
        }
    }
}

/// The stranger's sockets: its own, and one that sends as b (IP_TRANSPARENT lets it bind b's
/// address, which the stranger does not have).
fn sockets(ns: &Netns) -> (UdpSocket, UdpSocket) {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, bind, setsockopt, socket, sockopt,
    };
    ns.run(|| {
        let plain = UdpSocket::bind((ATTACKER, 0)).expect("the stranger's socket");
        let fd = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::empty(),
            None,
        )
        .expect("a UDP socket");
        setsockopt(&fd, sockopt::IpTransparent, &true).expect("IP_TRANSPARENT");
        let b: SockaddrIn = B.parse::<std::net::SocketAddrV4>().unwrap().into();
        bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &b).expect("binding b's address");
        (plain, UdpSocket::from(fd))
    })
    .unwrap()
}

#[tokio::test]
async fn garbage_and_replays_count_as_rejected_and_disturb_nothing() {
    let p = prefix("junk");
    let mut spaces = Spaces::new();
    let (wan, mut a, mut spokes) = common::hub::hub(&mut spaces, &p, 1).await;
    let stranger =
        common::hub::outsider(&mut spaces, &p, "x", &wan, &format!("{ATTACKER}/24")).await;
    let b = spokes.pop().expect("b");
    assert!(
        eventually(10, || a.ping("10.71.0.2")),
        "a's pod reaches b's\n{}",
        a.log()
    );
    let (plain, spoofed) = sockets(&stranger);
    let pid = a.pid();

    // a's pod sends to b's: what comes back from b are small data messages (TCP ACKs), one per
    // datagram, which the capture on a's WAN link keeps.
    let kept: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let keep = Arc::clone(&kept);
    let capture = Capture::start(&a.host, "wan0", move |d| {
        if !d.outgoing
            && d.src.to_string() == B
            && d.dst.to_string() == A
            && is_data(d.payload)
            && d.payload.len() <= 1_500
        {
            let mut k = keep.lock().unwrap();
            if k.len() < KEEP {
                k.push(d.payload.to_vec());
            }
        }
    });
    let _server = iperf::Server::start(&b.pod, "10.200.0.2", b.dir.join("iperf3.log"));
    let client = iperf::Client::start(&a.pod, "10.71.0.2", 12, 1.0);
    let full = eventually(4, || kept.lock().unwrap().len() >= KEEP);
    capture.stop();
    let replays = std::mem::take(&mut *kept.lock().unwrap());
    assert!(
        replays.len() >= 100,
        "captured {} data messages from b (full: {full})",
        replays.len()
    );
    let live: [u8; 4] = replays[replays.len() - 1][4..8].try_into().unwrap();

    let before = a.status_json().expect("a's status");
    let rss_before = a.rss_kib();
    let seed = Rng::seed();
    let started = Instant::now();
    let sent = attack(&mut Rng::new(seed), &plain, &spoofed, live, &replays);
    let took = started.elapsed();
    // What is still queued at a is counted once it is read.
    thread::sleep(Duration::from_millis(500));
    let after = a.status_json();
    let rss_after = a.rss_kib();
    let alive = a.alive();
    let rates = client.rates();

    let total: u64 = sent.values().sum();
    let naming_b: u64 = sent
        .iter()
        .filter(|(k, _)| matches!(k, Kind::Forged | Kind::Replayed | Kind::Spoofed))
        .map(|(_, n)| n)
        .sum();
    // Everything else names no session and carries no valid mac1.
    let stray = total - naming_b;
    let b_before = peer_status(&before, "b").clone();
    let after = after.expect("a still answers");
    let b_after = peer_status(&after, "b");
    eprintln!(
        "garbage (seed {seed}): {total} datagrams in {:.1} s ({:.0}/s), {} captured data messages of b \
         replayed (live index {:08x}): {sent:?}",
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64(),
        replays.len(),
        u32::from_le_bytes(live)
    );
    eprintln!(
        "throughput a -> b during it (Mbit/s): {:?}",
        iperf::mbit(&rates)
    );
    eprintln!(
        "a: pid {pid}, running {alive}, VmRSS {rss_before} -> {rss_after} KiB; wire {} -> {}",
        before["wire"], after["wire"]
    );
    eprintln!("a's peer b before: {b_before}\nafter: {b_after}");

    assert!(
        alive && a.pid() == pid,
        "a's gateway still runs\n{}",
        a.log()
    );
    assert!(rates.len() >= 10, "{rates:?}");
    assert!(
        rates.iter().all(|r| *r > 0.0),
        "an interval at zero: {:?}",
        iperf::mbit(&rates)
    );
    assert_eq!(
        counter(b_after, &["dropped"]),
        counter(&b_before, &["dropped"]),
        "b's own drops did not move"
    );
    let rejected = counter(b_after, &["rejected"]) - counter(&b_before, &["rejected"]);
    assert!(
        rejected * 10 >= naming_b * 9 && rejected <= naming_b + naming_b / 100 + 10,
        "b's rejected rose by {rejected} for {naming_b} datagrams naming its session"
    );
    let invalid = counter(&after, &["wire", "invalid"]) - counter(&before, &["wire", "invalid"]);
    assert!(
        invalid * 10 >= stray * 9 && invalid <= stray + stray / 100 + 10,
        "wire.invalid rose by {invalid} for {stray} datagrams that name no session"
    );
    assert!(
        rss_after <= rss_before + 16 * 1024,
        "VmRSS grew from {rss_before} to {rss_after} KiB"
    );
    assert_eq!(b_after["endpoint"], B, "b's endpoint stayed");
    drop(b);
}

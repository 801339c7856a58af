//! Path MTU across two peered clusters (needs root), driven only through the `liqo-lab` CLI.
//!
//! From the first pod of every node of each cluster to the first pod of every node of the other:
//! DF ICMP echoes (`ping -M do`) and DF UDP datagrams (`IP_PMTUDISC_DO`, answered by an echo
//! server in the remote pod) of every total IP size from 1,300 to 1,500 bytes. Each must either
//! pass (the echo comes back) or be answered with "fragmentation needed" (the sender learns the
//! path MTU); none may vanish. The pod's route cache (path-MTU exceptions included) is flushed
//! before every probe, so each size tests the path, not what the pod learnt from the last one.
//! Then default-MSS TCP carries a few MB each way between every such pair.
//!
//! The lab and the daemons it starts must be built (`cargo build --bins`): the test finds them
//! next to `liqo-lab`.

use std::{
    collections::BTreeMap,
    io::{self, Read, Write},
    net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket},
    os::fd::AsRawFd,
    process::{Command, Output},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::{self, JoinHandle},
    time::Duration,
};

use dataplane::{Netns, netns::require_root};
use ipnet::Ipv4Net;

const LAB: &str = env!("CARGO_BIN_EXE_liqo-lab");
/// The tunnel MTU of the lab's gateways (liqo-gateway's default): the largest packet that can
/// cross, so the boundary every sweep must find.
const TUNNEL_MTU: usize = 1420;
const SIZES: std::ops::RangeInclusive<usize> = 1300..=1500;
const UDP_PORT: u16 = 7447;
const TCP_PORT: u16 = 7448;
/// Bytes sent each way per TCP pair.
const BULK: usize = 4 << 20;
/// IPv4 and ICMP/UDP headers.
const HEADERS: usize = 28;

/// A lab built through the CLI, taken down on drop (also when the test panics).
struct Lab {
    prefix: String,
    up: bool,
}

impl Lab {
    fn cli(prefix: &str, args: &[&str]) -> Output {
        Command::new(LAB)
            .arg("--prefix")
            .arg(prefix)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running liqo-lab {args:?}: {e}"))
    }

    /// Runs `liqo-lab <args>` and returns its stdout; panics with its output if it failed.
    fn run(&self, args: &[&str]) -> String {
        let out = Lab::cli(&self.prefix, args);
        assert!(
            out.status.success(),
            "liqo-lab {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    fn up(prefix: String) -> Lab {
        // Armed before `up`, so that a half-built lab is removed too.
        let lab = Lab { prefix, up: true };
        lab.run(&["up", "--preset", "two-clusters"]);
        lab
    }

    fn down(mut self) {
        self.up = false;
        self.run(&["down"]);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.up {
            let out = Lab::cli(&self.prefix, &["down"]);
            if !out.status.success() {
                eprintln!(
                    "liqo-lab down failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// The first pod of a node.
#[derive(Debug, Clone)]
struct Pod {
    cluster: String,
    node: String,
    netns: String,
    addr: Ipv4Addr,
}

impl Pod {
    fn ns(&self) -> Netns {
        Netns::open(&self.netns.parse().expect("namespace name")).expect("pod namespace")
    }

    fn label(&self) -> String {
        format!("{}/{}", self.cluster, self.node)
    }
}

/// The first pod of every node, per cluster, from `status -o json` (rows in topology order: a
/// node, then its pods).
fn pods(status: &str) -> BTreeMap<String, Vec<Pod>> {
    let v: serde_json::Value = serde_json::from_str(status).expect("status JSON");
    let rows = v["namespaces"].as_array().expect("namespaces");
    let mut out: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    let mut node = String::new();
    for r in rows {
        let s = |k: &str| r[k].as_str().unwrap_or_else(|| panic!("{k} in {r}"));
        match s("role") {
            "node" | "gateway-node" => node = s("name").to_owned(),
            "pod" => {
                let pods = out.entry(s("cluster").to_owned()).or_default();
                if pods.last().is_none_or(|p| p.node != node) {
                    assert!(s("name").starts_with(&node), "{r}");
                    pods.push(Pod {
                        cluster: s("cluster").to_owned(),
                        node: node.clone(),
                        netns: s("netns").to_owned(),
                        addr: s("addresses").parse().expect("pod address"),
                    });
                }
            }
            other => panic!("unknown role {other}"),
        }
    }
    out
}

/// How `a` sees `b`'s pods, from `peer`'s output ("rome sees milan's pods at 10.71.0.0/16").
fn view(peer_output: &str, a: &str, b: &str) -> Ipv4Net {
    let key = format!("{a} sees {b}'s pods at ");
    let at = peer_output
        .find(&key)
        .unwrap_or_else(|| panic!("no {key:?} in {peer_output}"));
    peer_output[at + key.len()..]
        .split_whitespace()
        .next()
        .and_then(|s| s.trim_end_matches([',', ')']).parse().ok())
        .unwrap_or_else(|| panic!("no CIDR after {key:?} in {peer_output}"))
}

/// `addr` as seen through `view` (host bits are kept; the view has the pod CIDR's length).
fn translate(addr: Ipv4Addr, view: Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(view.network()) | (u32::from(addr) & u32::from(view.hostmask())))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    /// "Fragmentation needed" reached the sender; the path MTU it learnt.
    FragNeeded(usize),
    Vanished,
}

/// Forgets every route cache entry and learnt path MTU of the calling thread's namespace.
fn flush_route_cache() {
    dataplane::sysctl::set("net.ipv4.route.flush", "1").expect("flushing the route cache");
}

fn flush(ns: &Netns) {
    ns.run(flush_route_cache).expect("entering the pod");
}

/// `ping -M do` of `total` bytes (IP header included) from `ns` to `dst`.
fn ping(ns: &Netns, dst: Ipv4Addr, total: usize) -> Outcome {
    flush(ns);
    let out = ns
        .command("ping")
        .args(["-n", "-M", "do", "-c1", "-W1", "-s"])
        .arg((total - HEADERS).to_string())
        .arg(dst.to_string())
        .output()
        .expect("running ping");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {
            assert!(
                text.contains("bytes from"),
                "ping succeeded without a reply: {text}"
            );
            Outcome::Passed
        }
        // 1: no reply (errors, if any, are printed).
        Some(1) => {
            if text.contains("Frag needed") || text.contains("message too long") {
                let mtu = text
                    .split("mtu")
                    .nth(1)
                    .map(|s| s.trim_start_matches([' ', '=']))
                    .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("no MTU in {text}"));
                Outcome::FragNeeded(mtu)
            } else {
                assert!(text.contains("0 received"), "{text}");
                Outcome::Vanished
            }
        }
        _ => panic!("ping failed ({}): {text}", out.status),
    }
}

/// `setsockopt(IP_MTU_DISCOVER, IP_PMTUDISC_DO)`: DF on every datagram, never fragmented
/// locally, and a "fragmentation needed" reported to the socket as `EMSGSIZE`.
#[expect(
    unsafe_code,
    reason = "setsockopt(2): IP_MTU_DISCOVER has no safe wrapper in std or nix"
)]
fn pmtudisc_do(s: &UdpSocket) -> io::Result<()> {
    use nix::libc;
    let v: libc::c_int = libc::IP_PMTUDISC_DO;
    // SAFETY: the fd is open for the duration of the call (borrowed from `s`), and the option
    // value points to a live c_int whose size is passed along.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            (&raw const v).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn is_emsgsize(e: &io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::EMSGSIZE)
}

/// A DF UDP datagram of `total` bytes (IP header included) from `ns` to the echo server at
/// `dst`: passed if the same bytes come back, frag-needed if the socket reports `EMSGSIZE`.
fn udp(ns: &Netns, dst: SocketAddrV4, total: usize) -> Outcome {
    let sock = ns
        .run(|| -> io::Result<UdpSocket> {
            flush_route_cache();
            let s = UdpSocket::bind("0.0.0.0:0")?;
            pmtudisc_do(&s)?;
            s.connect(dst)?;
            Ok(s)
        })
        .expect("entering the pod")
        .expect("UDP socket");
    sock.set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    let learnt = |s: &UdpSocket| {
        nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::IpMtu)
            .expect("IP_MTU of a connected socket") as usize
    };
    let payload: Vec<u8> = (0..total - HEADERS)
        .map(|i| (i * 7 + total) as u8)
        .collect();
    match sock.send(&payload) {
        Ok(n) => assert_eq!(n, payload.len()),
        Err(e) if is_emsgsize(&e) => return Outcome::FragNeeded(learnt(&sock)),
        Err(e) => panic!("sending {total} bytes to {dst}: {e}"),
    }
    let mut buf = vec![0; 65536];
    match sock.recv(&mut buf) {
        Ok(n) => {
            assert_eq!(&buf[..n], &payload[..], "echo of {total} bytes from {dst}");
            Outcome::Passed
        }
        Err(e) if is_emsgsize(&e) => Outcome::FragNeeded(learnt(&sock)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Outcome::Vanished
        }
        Err(e) => panic!("receiving the echo of {total} bytes from {dst}: {e}"),
    }
}

/// A UDP echo server and a TCP server (reads to EOF, answers with as many bytes) in a pod,
/// stopped on drop.
struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// The byte at `i` of a bulk transfer.
fn bulk_byte(i: usize) -> u8 {
    (i % 251) as u8
}

impl Servers {
    fn start(pod: &Pod) -> Servers {
        let (udp, tcp) = pod
            .ns()
            .run(|| -> io::Result<(UdpSocket, TcpListener)> {
                Ok((
                    UdpSocket::bind(("0.0.0.0", UDP_PORT))?,
                    TcpListener::bind(("0.0.0.0", TCP_PORT))?,
                ))
            })
            .expect("entering the pod")
            .expect("servers");
        let stop = Arc::new(AtomicBool::new(false));
        udp.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        tcp.set_nonblocking(true).expect("non-blocking");
        let s = Arc::clone(&stop);
        let echo = thread::spawn(move || {
            let mut buf = vec![0; 65536];
            while !s.load(Ordering::Relaxed) {
                if let Ok((n, from)) = udp.recv_from(&mut buf) {
                    // An echo that cannot be sent is a probe that vanished: the client says so.
                    let _ = udp.send_to(&buf[..n], from);
                }
            }
        });
        let s = Arc::clone(&stop);
        let bulk = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match tcp.accept() {
                    Ok((conn, _)) => serve_bulk(conn),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
        });
        Servers {
            stop,
            threads: vec![echo, bulk],
        }
    }
}

/// Reads to EOF, then sends back as many bytes; a broken connection is the client's failure to
/// report.
fn serve_bulk(mut conn: TcpStream) {
    let mut io = || -> io::Result<()> {
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(Duration::from_secs(20)))?;
        conn.set_write_timeout(Some(Duration::from_secs(20)))?;
        let mut n = 0;
        let mut buf = vec![0; 65536];
        loop {
            let k = conn.read(&mut buf)?;
            if k == 0 {
                break;
            }
            n += k;
        }
        let out: Vec<u8> = (0..n).map(bulk_byte).collect();
        conn.write_all(&out)?;
        conn.shutdown(std::net::Shutdown::Write)
    };
    if let Err(e) = io() {
        eprintln!("bulk server: {e}");
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // A server thread that panicked already failed the test through its client.
            let _ = t.join();
        }
    }
}

/// `BULK` bytes from `src` to the TCP server at `dst` with the default MSS, and as many back;
/// every byte checked.
fn bulk(src: &Pod, dst: SocketAddrV4) -> Result<(), String> {
    let mut conn = src
        .ns()
        .run(|| TcpStream::connect_timeout(&dst.into(), Duration::from_secs(5)))
        .expect("entering the pod")
        .map_err(|e| format!("connecting: {e}"))?;
    let fail = |what: &str| {
        let what = what.to_owned();
        move |e: io::Error| format!("{what}: {e}")
    };
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(fail("timeout"))?;
    conn.set_write_timeout(Some(Duration::from_secs(20)))
        .map_err(fail("timeout"))?;
    let out: Vec<u8> = (0..BULK).map(bulk_byte).collect();
    conn.write_all(&out).map_err(fail("sending"))?;
    conn.shutdown(std::net::Shutdown::Write)
        .map_err(fail("shutdown"))?;
    let mut back = Vec::with_capacity(BULK);
    conn.read_to_end(&mut back).map_err(fail("receiving"))?;
    if back != out {
        return Err(format!(
            "got {} bytes back, not the {BULK} sent",
            back.len()
        ));
    }
    Ok(())
}

/// One sweep's results.
#[derive(Debug, Default)]
struct Tally {
    passed: Vec<usize>,
    frag: Vec<(usize, usize)>,
    vanished: Vec<usize>,
}

impl Tally {
    fn add(&mut self, size: usize, o: Outcome) {
        match o {
            Outcome::Passed => self.passed.push(size),
            Outcome::FragNeeded(mtu) => self.frag.push((size, mtu)),
            Outcome::Vanished => self.vanished.push(size),
        }
    }

    /// What is wrong with it, if anything: something vanished, a size up to the tunnel MTU did
    /// not pass, or a larger one was not refused with a path MTU below its size.
    fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !self.vanished.is_empty() {
            p.push(format!("vanished: {}", ranges(&self.vanished)));
        }
        let big: Vec<usize> = self
            .passed
            .iter()
            .copied()
            .filter(|s| *s > TUNNEL_MTU)
            .collect();
        if !big.is_empty() {
            p.push(format!("passed above {TUNNEL_MTU}: {}", ranges(&big)));
        }
        let small: Vec<usize> = self
            .frag
            .iter()
            .map(|(s, _)| *s)
            .chain(self.vanished.iter().copied())
            .filter(|s| *s <= TUNNEL_MTU)
            .collect();
        if !small.is_empty() {
            p.push(format!(
                "did not pass up to {TUNNEL_MTU}: {}",
                ranges(&small)
            ));
        }
        let mut wrong: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (size, mtu) in &self.frag {
            if mtu >= size || *mtu != TUNNEL_MTU {
                wrong.entry(*mtu).or_default().push(*size);
            }
        }
        for (mtu, sizes) in wrong {
            p.push(format!("frag-needed with MTU {mtu}: {}", ranges(&sizes)));
        }
        p
    }
}

/// `1300-1420, 1451` for people.
fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

#[test]
fn every_df_packet_from_every_pod_passes_or_gets_frag_needed() {
    require_root();
    let lab = Lab::up(format!("mt{}", std::process::id() % 10_000_000));
    let peered = lab.run(&["peer", "rome", "milan"]);
    let pods = pods(&lab.run(&["status", "-o", "json"]));
    assert_eq!(pods.len(), 2, "{pods:?}");
    for (c, p) in &pods {
        assert!(p.len() >= 2, "{c} needs a gateway node and another: {p:?}");
    }
    let servers: Vec<Servers> = pods.values().flatten().map(Servers::start).collect();

    // (from, to, kind) -> results
    let mut sweeps: BTreeMap<(String, String, &str), Tally> = BTreeMap::new();
    let mut tcp: Vec<(String, String, Result<(), String>)> = Vec::new();
    for (a, b) in [("rome", "milan"), ("milan", "rome")] {
        let v = view(&peered, a, b);
        for src in &pods[a] {
            let ns = src.ns();
            for dst in &pods[b] {
                let addr = translate(dst.addr, v);
                let key = |kind| (src.label(), dst.label(), kind);
                let mut icmp = Tally::default();
                let mut dgram = Tally::default();
                for size in SIZES {
                    icmp.add(size, ping(&ns, addr, size));
                    dgram.add(size, udp(&ns, SocketAddrV4::new(addr, UDP_PORT), size));
                }
                sweeps.insert(key("ICMP"), icmp);
                sweeps.insert(key("UDP"), dgram);
                tcp.push((
                    src.label(),
                    dst.label(),
                    bulk(src, SocketAddrV4::new(addr, TCP_PORT)),
                ));
            }
        }
    }

    let mut report = format!(
        "{:<12} {:<12} {:<5} {:>6} {:>13} {:>8}  problems\n",
        "FROM", "TO", "KIND", "PASSED", "FRAG-NEEDED", "VANISHED"
    );
    let mut failed = false;
    for ((from, to, kind), t) in &sweeps {
        let problems = t.problems();
        failed |= !problems.is_empty();
        report += &format!(
            "{from:<12} {to:<12} {kind:<5} {:>6} {:>13} {:>8}  {}\n",
            t.passed.len(),
            t.frag.len(),
            t.vanished.len(),
            problems.join("; ")
        );
    }
    for (from, to, r) in &tcp {
        failed |= r.is_err();
        report += &format!(
            "{from:<12} {to:<12} TCP   {} MB each way: {}\n",
            BULK >> 20,
            match r {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("FAILED: {e}"),
            }
        );
    }
    eprintln!("{report}");
    assert!(!failed, "path MTU:\n{report}");
    let pairs = 2 * pods["rome"].len() * pods["milan"].len();
    assert_eq!(sweeps.len(), 2 * pairs, "{report}");
    assert_eq!(tcp.len(), pairs, "{report}");
    drop(servers);
    lab.down();
}

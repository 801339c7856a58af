//! Connectivity probes between lab pods: ICMP with the real `ping`, and TCP to an echo server
//! in the target pod that answers with the client address it sees (so NAT is observable).

use std::{
    collections::VecDeque,
    fmt::Write as _,
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use dataplane::{Netns, NetnsName};

use super::{Lab, LabError};

/// TCP port of the echo server inside each probed pod.
pub const ECHO_PORT: u16 = 7777;
const TIMEOUT: Duration = Duration::from_secs(2);
const WORKERS: usize = 16;

/// A pod taking part in a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its cluster.
    pub cluster: String,
    /// Its name (`n0-p1`).
    pub pod: String,
    /// Its namespace.
    pub netns: NetnsName,
    /// Its own address.
    pub addr: Ipv4Addr,
}

/// One probe from `src` to `dst` (indices into [`Matrix::endpoints`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Source endpoint.
    pub src: usize,
    /// Destination endpoint.
    pub dst: usize,
    /// The address dialled (the destination's address as the source's cluster sees it).
    pub addr: Ipv4Addr,
    /// Whether the destination answered ping.
    pub icmp: bool,
    /// The source address the destination's server saw, or why TCP failed.
    pub tcp: Result<Ipv4Addr, String>,
}

impl Probe {
    /// Both ICMP and TCP went through.
    pub fn ok(&self) -> bool {
        self.icmp && self.tcp.is_ok()
    }
}

/// The result of a check.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Pods involved.
    pub endpoints: Vec<Endpoint>,
    /// Probes run.
    pub probes: Vec<Probe>,
}

/// Every pod of the lab, in topology order.
pub fn endpoints(lab: &Lab) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for c in &lab.topology.clusters {
        for (_, pod) in c.pods() {
            out.push(Endpoint {
                cluster: c.name.to_string(),
                pod: pod.name.clone(),
                netns: lab.pod_netns(c.name.as_str(), &pod.name),
                addr: pod.addr.addr(),
            });
        }
    }
    out
}

/// Every pod to every other pod of the same cluster, at its own address.
pub fn intra_cluster(lab: &Lab) -> Result<Matrix, LabError> {
    let eps = endpoints(lab);
    let mut pairs = Vec::new();
    for (s, src) in eps.iter().enumerate() {
        for (d, dst) in eps.iter().enumerate() {
            if s != d && src.cluster == dst.cluster {
                pairs.push((s, d, dst.addr));
            }
        }
    }
    run(eps, pairs)
}

/// Runs the probes `(src, dst, address to dial)` in parallel and collects the matrix.
pub fn run(
    endpoints: Vec<Endpoint>,
    pairs: Vec<(usize, usize, Ipv4Addr)>,
) -> Result<Matrix, LabError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut servers = Vec::new();
    let mut targets: Vec<usize> = pairs.iter().map(|p| p.1).collect();
    targets.sort_unstable();
    targets.dedup();
    let mut started = Ok(());
    for &d in &targets {
        match echo_server(&endpoints[d].netns, Arc::clone(&stop)) {
            Ok(h) => servers.push(h),
            Err(e) => {
                started = Err(e);
                break;
            }
        }
    }
    let probes = started.map(|()| probe_all(&endpoints, pairs));
    stop.store(true, Ordering::Relaxed);
    for s in servers {
        let _ = s.join();
    }
    Ok(Matrix {
        endpoints,
        probes: probes?,
    })
}

fn probe_all(endpoints: &[Endpoint], pairs: Vec<(usize, usize, Ipv4Addr)>) -> Vec<Probe> {
    let queue = Mutex::new(pairs.into_iter().collect::<VecDeque<_>>());
    let done = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let Some((src, dst, addr)) = queue.lock().expect("queue").pop_front() else {
                        break;
                    };
                    let p = probe(&endpoints[src].netns, src, dst, addr);
                    done.lock().expect("results").push(p);
                }
            });
        }
    });
    let mut probes = done.into_inner().expect("results");
    probes.sort_by_key(|p| (p.src, p.dst));
    probes
}

fn probe(src_ns: &NetnsName, src: usize, dst: usize, addr: Ipv4Addr) -> Probe {
    let ns = match Netns::open(src_ns) {
        Ok(ns) => ns,
        Err(e) => {
            return Probe {
                src,
                dst,
                addr,
                icmp: false,
                tcp: Err(e.to_string()),
            };
        }
    };
    let icmp = ns
        .command("ping")
        .args(["-c1", "-W2", "-q", &addr.to_string()])
        .output()
        .is_ok_and(|o| o.status.success());
    let tcp = ns
        .run(|| tcp_probe(addr))
        .map_err(|e| e.to_string())
        .and_then(|r| r);
    Probe {
        src,
        dst,
        addr,
        icmp,
        tcp,
    }
}

fn tcp_probe(addr: Ipv4Addr) -> Result<Ipv4Addr, String> {
    let mut s = TcpStream::connect_timeout(&SocketAddr::from((addr, ECHO_PORT)), TIMEOUT)
        .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut seen = String::new();
    s.read_to_string(&mut seen).map_err(|e| e.to_string())?;
    seen.trim()
        .parse()
        .map_err(|_| format!("bad echo reply {seen:?}"))
}

/// A TCP server in `ns` that writes each client's address back, until `stop` is set.
fn echo_server(
    ns_name: &NetnsName,
    stop: Arc<AtomicBool>,
) -> Result<thread::JoinHandle<()>, LabError> {
    let ns = Netns::open(ns_name)?;
    let listener = ns
        .run(|| {
            let l = TcpListener::bind(("0.0.0.0", ECHO_PORT))?;
            l.set_nonblocking(true)?;
            Ok::<_, std::io::Error>(l)
        })?
        .map_err(|e| LabError::Build {
            what: format!("echo server in {ns_name}"),
            source: Box::new(e),
        })?;
    Ok(thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, peer)) => {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.write_all(peer.ip().to_string().as_bytes());
                }
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    }))
}

impl Matrix {
    /// Probes that failed.
    pub fn failures(&self) -> Vec<&Probe> {
        self.probes.iter().filter(|p| !p.ok()).collect()
    }

    /// A grid of the results plus the failures, for people.
    pub fn render(&self) -> String {
        let mut out = String::from("targets (reached at):\n");
        let width = self
            .endpoints
            .iter()
            .map(|e| e.cluster.len() + e.pod.len() + 1)
            .max()
            .unwrap_or(0);
        for (i, e) in self.endpoints.iter().enumerate() {
            let reached: Vec<String> = {
                let mut a: Vec<Ipv4Addr> = self
                    .probes
                    .iter()
                    .filter(|p| p.dst == i)
                    .map(|p| p.addr)
                    .collect();
                a.sort_unstable();
                a.dedup();
                a.iter().map(Ipv4Addr::to_string).collect()
            };
            let name = format!("{}/{}", e.cluster, e.pod);
            let _ = writeln!(
                out,
                "  [{:>2}] {name:<width$}  own {:<15} {}",
                i + 1,
                e.addr,
                reached.join(", ")
            );
        }
        let _ = write!(out, "\n{:>w$}", "from \\ to", w = width + 7);
        for i in 0..self.endpoints.len() {
            let _ = write!(out, " {:>3}", i + 1);
        }
        out.push('\n');
        for (s, e) in self.endpoints.iter().enumerate() {
            let _ = write!(
                out,
                "  [{:>2}] {:<width$}",
                s + 1,
                format!("{}/{}", e.cluster, e.pod)
            );
            for d in 0..self.endpoints.len() {
                let cell = match self.probes.iter().find(|p| p.src == s && p.dst == d) {
                    None => "·",
                    Some(p) if p.ok() => "ok",
                    Some(p) if p.icmp => "T!",
                    Some(p) if p.tcp.is_ok() => "I!",
                    Some(_) => "XX",
                };
                let _ = write!(out, " {cell:>3}");
            }
            out.push('\n');
        }
        let fails = self.failures();
        let _ = writeln!(
            out,
            "\n{} of {} probes passed (ICMP and TCP); ok = both, I! = ping failed, T! = TCP failed, XX = both, · = not probed",
            self.probes.len() - fails.len(),
            self.probes.len()
        );
        for p in fails {
            let (s, d) = (&self.endpoints[p.src], &self.endpoints[p.dst]);
            let _ = writeln!(
                out,
                "  FAIL {}/{} -> {}/{} at {}: icmp {}, tcp {}",
                s.cluster,
                s.pod,
                d.cluster,
                d.pod,
                p.addr,
                if p.icmp { "ok" } else { "no answer" },
                p.tcp
                    .as_ref()
                    .map_or_else(|e| e.clone(), |a| format!("ok (seen as {a})"))
            );
        }
        out
    }
}

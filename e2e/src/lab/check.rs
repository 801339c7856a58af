//! Connectivity probes between lab pods: ICMP with the real `ping`, and TCP to an echo server
//! in the target pod that answers with the client address it sees (so NAT is observable;
//! the server and the TCP probe: [`echo`]).

mod echo;

pub use echo::{ECHO_PORT, TcpProbeError};
pub(crate) use echo::{echo_server, tcp_probe_within};

use std::{
    collections::VecDeque,
    fmt::Write as _,
    net::Ipv4Addr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
};

use dataplane::{Netns, NetnsName};

use liqo_types::PeerView;

use super::{
    Lab, LabError, cluster,
    names::{BadTarget, Target},
};
use crate::topology::Cluster;

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
#[derive(Debug, Clone)]
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
    pub tcp: Result<Ipv4Addr, TcpProbeError>,
    /// The source address the server should see (the source in the server's view).
    pub expect_seen: Ipv4Addr,
}

impl Probe {
    /// ICMP and TCP went through, and the server saw the expected source.
    pub fn ok(&self) -> bool {
        self.icmp && self.tcp.as_ref().is_ok_and(|s| *s == self.expect_seen)
    }
}

/// A probe to run: from `src` to `dst` dialling `addr`; the server should see `expect_seen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// Source endpoint index.
    pub src: usize,
    /// Destination endpoint index.
    pub dst: usize,
    /// Address dialled.
    pub addr: Ipv4Addr,
    /// Source address the server should see.
    pub expect_seen: Ipv4Addr,
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
    let pairs = same_cluster_pairs(&eps);
    run(eps, pairs)
}

fn same_cluster_pairs(eps: &[Endpoint]) -> Vec<Pair> {
    let mut pairs = Vec::new();
    for (s, src) in eps.iter().enumerate() {
        for (d, dst) in eps.iter().enumerate() {
            if s != d && src.cluster == dst.cluster {
                pairs.push(Pair {
                    src: s,
                    dst: d,
                    addr: dst.addr,
                    expect_seen: src.addr,
                });
            }
        }
    }
    pairs
}

/// Every pod to every pod of its cluster, plus, for every peering, every pod of the cluster to
/// every pod of the peer at its address in the source cluster's view; each server must see the
/// client at its address in the server cluster's view.
pub fn with_peerings(lab: &Lab) -> Result<Matrix, LabError> {
    with_views(lab, &cluster::peerings(lab)?)
}

/// [`with_peerings`] over the given peerings `(cluster, peer, the cluster's view of the peer)`
/// (the Kubernetes mode reads them from the TunnelEndpoints).
pub fn with_views(lab: &Lab, views: &[(String, String, PeerView)]) -> Result<Matrix, LabError> {
    let eps = endpoints(lab);
    let mut pairs = same_cluster_pairs(&eps);
    for (from, to, view) in views {
        let (cf, ct) = (known(lab, from)?, known(lab, to)?);
        for (s, src) in eps.iter().enumerate().filter(|(_, e)| e.cluster == *from) {
            for (d, dst) in eps.iter().enumerate().filter(|(_, e)| e.cluster == *to) {
                pairs.push(Pair {
                    src: s,
                    dst: d,
                    addr: view.remote_pod(&cluster::pod_cidr(ct), dst.addr),
                    expect_seen: view.mirrored().remote_pod(&cluster::pod_cidr(cf), src.addr),
                });
            }
        }
    }
    run(eps, pairs)
}

/// Runs the probes `(src, dst, address to dial)` in parallel and collects the matrix.
pub fn run(endpoints: Vec<Endpoint>, pairs: Vec<Pair>) -> Result<Matrix, LabError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut servers = Vec::new();
    let mut targets: Vec<usize> = pairs.iter().map(|p| p.dst).collect();
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
        // A server thread that panicked shows as failed probes to its pod.
        let _ = s.join();
    }
    Ok(Matrix {
        endpoints,
        probes: probes?,
    })
}

fn probe_all(endpoints: &[Endpoint], pairs: Vec<Pair>) -> Vec<Probe> {
    let queue = Mutex::new(pairs.into_iter().collect::<VecDeque<_>>());
    let done = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let Some(pair) = queue.lock().expect("queue").pop_front() else {
                        break;
                    };
                    let p = probe(&endpoints[pair.src].netns, pair);
                    done.lock().expect("results").push(p);
                }
            });
        }
    });
    let mut probes = done.into_inner().expect("results");
    probes.sort_by_key(|p| (p.src, p.dst));
    probes
}

fn probe(src_ns: &NetnsName, pair: Pair) -> Probe {
    let Pair {
        src,
        dst,
        addr,
        expect_seen,
    } = pair;
    let ns = match Netns::open(src_ns) {
        Ok(ns) => ns,
        Err(e) => {
            return Probe {
                src,
                dst,
                addr,
                icmp: false,
                tcp: Err(TcpProbeError::Netns(Arc::new(e))),
                expect_seen,
            };
        }
    };
    let icmp = ns
        .command("ping")
        .args(["-c1", "-W2", "-q", &addr.to_string()])
        .output()
        .is_ok_and(|o| o.status.success());
    let tcp = ns
        .run(|| echo::tcp_probe(addr))
        .map_err(|e| TcpProbeError::Netns(Arc::new(e)))
        .and_then(|r| r);
    Probe {
        src,
        dst,
        addr,
        icmp,
        tcp,
        expect_seen,
    }
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
            // Writing into a String cannot fail.
            let _ = writeln!(
                out,
                "  [{:>2}] {name:<width$}  own {:<15} {}",
                i + 1,
                e.addr,
                reached.join(", ")
            );
        }
        // Writing into a String cannot fail.
        let _ = write!(out, "\n{:>w$}", "from \\ to", w = width + 7);
        for i in 0..self.endpoints.len() {
            // Writing into a String cannot fail.
            let _ = write!(out, " {:>3}", i + 1);
        }
        out.push('\n');
        for (s, e) in self.endpoints.iter().enumerate() {
            // Writing into a String cannot fail.
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
                    Some(p) if p.icmp && p.tcp.is_ok() => "S!",
                    Some(p) if p.icmp => "T!",
                    Some(p) if p.tcp.is_ok() => "I!",
                    Some(_) => "XX",
                };
                // Writing into a String cannot fail.
                let _ = write!(out, " {cell:>3}");
            }
            out.push('\n');
        }
        let fails = self.failures();
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "\n{} of {} probes passed (ICMP and TCP, source as expected); ok = all, I! = ping failed, T! = TCP failed, S! = unexpected source, XX = both failed, · = not probed",
            self.probes.len() - fails.len(),
            self.probes.len()
        );
        for p in fails {
            let (s, d) = (&self.endpoints[p.src], &self.endpoints[p.dst]);
            // Writing into a String cannot fail.
            let _ = writeln!(
                out,
                "  FAIL {}/{} -> {}/{} at {}: icmp {}, tcp {}",
                s.cluster,
                s.pod,
                d.cluster,
                d.pod,
                p.addr,
                if p.icmp { "ok" } else { "no answer" },
                p.tcp.as_ref().map_or_else(
                    |e| e.to_string(),
                    |a| format!("seen as {a}, expected {}", p.expect_seen)
                )
            );
        }
        out
    }
}

/// A cluster a record names, which the topology must have.
fn known<'a>(lab: &'a Lab, name: &str) -> Result<&'a Cluster, LabError> {
    lab.topology.cluster(name).ok_or_else(|| {
        LabError::build(
            "reading the recorded peerings",
            format!(
                "they name cluster {name:?}, which lab {} does not have",
                lab.prefix
            ),
        )
    })
}

/// Where pod `pod` of `cluster` is reached through `view` (another cluster's view of it); an
/// unknown cluster or pod is an error naming the choices.
pub fn translated(
    lab: &Lab,
    cluster: &str,
    pod: &str,
    view: &PeerView,
) -> Result<Ipv4Addr, LabError> {
    let target: Target = format!("{cluster}/{pod}").parse()?;
    lab.netns_name(&target)?;
    let c = known(lab, cluster)?;
    let (_, p) = c
        .pods()
        .find(|(_, p)| p.name == pod)
        .ok_or_else(|| BadTarget {
            target: target.to_string(),
            why: format!("{pod} is a node or the LAN of {cluster}, not a pod"),
        })?;
    Ok(view.remote_pod(&cluster::pod_cidr(c), p.addr.addr()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn an_unknown_pod_is_an_error_not_an_address() {
        let lab = Lab {
            prefix: "t".parse().unwrap(),
            topology: Topology::preset("two-clusters").unwrap(),
        };
        let c = |s: &str| s.parse().unwrap();
        let view = PeerView {
            remote_pods: c("10.71.0.0/16"),
            remote_external: c("10.72.0.0/16"),
            local_pods_at_peer: c("10.50.0.0/16"),
            local_external_at_peer: c("10.51.0.0/16"),
        };
        let got = translated(&lab, "milan", "n1-p0", &view).unwrap();
        assert_eq!(got.to_string(), "10.71.1.2");
        // The old lab printed 0.0.0.0 for each of these.
        for (cluster, pod) in [
            ("milan", "n9-p9"),
            ("paris", "n0-p0"),
            ("milan", "n0"),
            ("milan", "lan"),
        ] {
            let e = translated(&lab, cluster, pod, &view)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("{cluster}/{pod}")), "{e}");
        }
    }
}

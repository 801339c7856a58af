//! `liqo-lab bench path`: pod-to-pod TCP throughput and RTT along the three paths a pod takes,
//! on a lab of two peered clusters with the same pod CIDR (two nodes each):
//!
//! - within a node (two pods on one bridge);
//! - across nodes of a cluster (the cluster's own routing);
//! - across clusters, with pods on non-gateway nodes at both ends: overlay to the gateway node,
//!   NAT and WireGuard to the peer's gateway, NAT and overlay to the target's node.
//!
//! In the same run it measures our gateway alone (`bench tunnel`'s `ours` variant, unpinned) and
//! reports the cross-cluster path as a fraction of it. Repeats are interleaved across the paths.

use std::{
    net::Ipv4Addr,
    process::Stdio,
    time::{Duration, Instant},
};

use dataplane::{Netns, NetnsName, supervisor::Spec};
use serde::{Deserialize, Serialize};

use super::{BenchError, Options, Profile, Spread, Variant, parse, run};
use crate::{
    lab::{self, Lab},
    topology::Topology,
};

/// TCP port of the iperf3 server in the target pod.
const PORT: u16 = 5202;

/// One measured path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Path {
    /// What it is.
    pub name: String,
    /// Client pod (`cluster/pod`).
    pub from: String,
    /// Server pod.
    pub to: String,
    /// The address dialled.
    pub addr: Ipv4Addr,
    #[serde(skip)]
    src: Option<NetnsName>,
    #[serde(skip)]
    dst: Option<NetnsName>,
    /// The server pod's own address (it binds there).
    #[serde(skip)]
    dst_own: Option<Ipv4Addr>,
}

/// One measurement of one path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    /// TCP goodput, one stream, Gbit/s.
    pub gbps: f64,
    /// Average ping RTT, µs.
    pub rtt_us: f64,
}

/// The figures of one path over the repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathRow {
    /// The path.
    pub path: Path,
    /// Throughput over the repeats.
    pub gbps: Option<Spread>,
    /// RTT over the repeats.
    pub rtt_us: Option<Spread>,
    /// Failed repeats, with why.
    pub errors: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathReport {
    /// Repeats per path.
    pub repeats: u32,
    /// Seconds per iperf3 test.
    pub seconds: u32,
    /// Within a node, across nodes, across clusters.
    pub rows: Vec<PathRow>,
    /// Our gateway alone (`bench tunnel`, variant ours, profile shared), Gbit/s.
    pub gateway_alone_gbps: Option<Spread>,
    /// Cross-cluster median over the gateway-alone median.
    pub cross_over_gateway: Option<f64>,
}

/// The share of the gateway-alone figure the cross-cluster path should reach.
pub const TARGET_SHARE: f64 = 0.5;
/// Most RTT the two gateways may add: across clusters over across nodes, µs (medians).
pub const TARGET_ADDED_RTT_US: f64 = 100.0;

/// The three paths of the lab `l` (two-clusters, peered).
pub fn paths(l: &Lab) -> Result<Vec<Path>, lab::LabError> {
    paths_with(l, &lab::peerings(l)?)
}

/// [`paths`] with the given peerings `(cluster, peer, view)` (with control planes: the
/// TunnelEndpoints').
pub fn paths_with(
    l: &Lab,
    views: &[(String, String, liqo_types::PeerView)],
) -> Result<Vec<Path>, lab::LabError> {
    let (_, _, view) = views
        .iter()
        .find(|(c, p, _)| c == "rome" && p == "milan")
        .ok_or_else(|| lab::LabError::Build {
            what: "finding the paths".into(),
            source: "rome and milan are not peered".into(),
        })?;
    let milan = l.topology.cluster("milan").expect("preset");
    let target = &milan.nodes[1].pods[0];
    let own = |c: &str, node: usize, pod: usize| {
        let p = &l.topology.cluster(c).expect("preset").nodes[node].pods[pod];
        (
            format!("{c}/{}", p.name),
            l.pod_netns(c, &p.name),
            p.addr.addr(),
        )
    };
    let (from, src, _) = own("rome", 1, 0);
    let path = |name: &str, (to, dst, addr): (String, NetnsName, Ipv4Addr), own: Ipv4Addr| Path {
        name: name.into(),
        from: from.clone(),
        to,
        addr,
        src: Some(src.clone()),
        dst: Some(dst),
        dst_own: Some(own),
    };
    let (a, b) = (own("rome", 1, 1), own("rome", 0, 0));
    let (a_own, b_own) = (a.2, b.2);
    Ok(vec![
        path("within a node", a, a_own),
        path("across nodes", b, b_own),
        path(
            "across clusters",
            (
                format!("milan/{}", target.name),
                l.pod_netns("milan", &target.name),
                view.remote_pod(
                    &liqo_types::Cidr::new(milan.pod_cidr).expect("validated topology"),
                    target.addr.addr(),
                ),
            ),
            target.addr.addr(),
        ),
    ])
}

fn fail(what: impl Into<String>, detail: impl Into<String>) -> BenchError {
    BenchError::Step {
        what: what.into(),
        detail: detail.into(),
    }
}

fn listening(ns: &Netns, addr: Ipv4Addr) -> bool {
    ns.run(|| std::fs::read_to_string("/proc/thread-self/net/tcp"))
        .ok()
        .and_then(Result::ok)
        .is_some_and(|t| parse::tcp_listening(&t, addr, PORT))
}

/// Measures `p` once: iperf3 for `secs` with one stream, then 100 pings.
pub fn measure(p: &Path, secs: u32) -> Result<Figure, BenchError> {
    let (Some(src), Some(dst), Some(bind)) = (&p.src, &p.dst, p.dst_own) else {
        return Err(fail(
            "measuring",
            "a path read back from JSON has no namespaces",
        ));
    };
    let (src, dst) = (Netns::open(src)?, Netns::open(dst)?);
    let _server = Spec::new("iperf3", "iperf3", "/dev/null")
        .args([
            "-s".to_owned(),
            "-B".to_owned(),
            bind.to_string(),
            "-p".to_owned(),
            PORT.to_string(),
        ])
        .netns(&dst)
        .attached()
        .map_err(|e| BenchError::step("starting iperf3 -s", &e))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !listening(&dst, bind) {
        if Instant::now() > deadline {
            return Err(fail("the iperf3 server", "not listening after 5 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let what = format!("iperf3 {} -> {}", p.from, p.to);
    let out = src
        .command("iperf3")
        .args(["-c", &p.addr.to_string(), "-p", &PORT.to_string()])
        .args([
            "-t",
            &secs.to_string(),
            "-O",
            "1",
            "-J",
            "--connect-timeout",
            "3000",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(&what, e.to_string()))?;
    let r =
        parse::iperf3_json(&String::from_utf8_lossy(&out.stdout)).map_err(|e| fail(&what, e))?;
    let ping = src
        .command("ping")
        .args([
            "-c",
            "100",
            "-i",
            "0.005",
            "-W",
            "1",
            "-q",
            &p.addr.to_string(),
        ])
        .output()
        .map_err(|e| fail("ping", e.to_string()))?;
    let ping =
        parse::ping_summary(&String::from_utf8_lossy(&ping.stdout)).map_err(|e| fail("ping", e))?;
    if ping.received == 0 {
        return Err(fail(format!("ping {}", p.addr), "no reply"));
    }
    Ok(Figure {
        gbps: r.bits_per_second / 1e9,
        rtt_us: ping.avg_us,
    })
}

/// Runs `liqo-lab bench path`: the lab under `opts.prefix`, then our gateway alone.
pub async fn path(opts: Options) -> Result<PathReport, BenchError> {
    let opts = opts.validate()?;
    let topo = Topology::preset("two-clusters")
        .map_err(|e| fail("the two-clusters preset", e.to_string()))?;
    let l = lab::up(opts.prefix.clone(), topo).await?;
    let measured = measure_lab(&l, &opts);
    let down = lab::down(&l.prefix);
    let rows = measured?;
    down?;
    with_gateway_alone(opts, rows).await
}

/// `liqo-lab bench path --k8s`: the same on a lab with control planes (`up --k8s`), peered by
/// `liqoctl`, the cross-cluster address from rome's TunnelEndpoint.
pub async fn path_k8s(opts: Options) -> Result<PathReport, BenchError> {
    let opts = opts.validate()?;
    let topo = Topology::preset("two-clusters")
        .map_err(|e| fail("the two-clusters preset", e.to_string()))?;
    let k = lab::k8s::up(opts.prefix.clone(), topo, &lab::k8s::Options::default())
        .await
        .map_err(|e| fail("up --k8s", liqo_types::chain(&e)))?;
    let measured = measure_k8s(&k, &opts).await;
    let down = lab::k8s::down(&k.lab.prefix);
    let rows = measured?;
    down.map_err(|e| fail("down", liqo_types::chain(&e)))?;
    with_gateway_alone(opts, rows).await
}

async fn measure_k8s(k: &lab::k8s::K8sLab, opts: &Options) -> Result<Vec<PathRow>, BenchError> {
    let k8s = |e: lab::k8s::K8sLabError| fail("peering with liqoctl", liqo_types::chain(&e));
    let t = Instant::now();
    k.peer("rome", "milan").map_err(k8s)?;
    k.first_cross_probe("rome", "milan", t, 60)
        .await
        .map_err(k8s)?;
    let views = lab::k8s::views::peerings(k).await.map_err(k8s)?;
    measure_paths(paths_with(&k.lab, &views)?, opts)
}

/// The report of `rows` with our gateway alone measured after them.
async fn with_gateway_alone(opts: Options, rows: Vec<PathRow>) -> Result<PathReport, BenchError> {
    let tunnel = run::tunnel(Options {
        variants: vec![Variant::Ours],
        profiles: vec![Profile::Shared],
        ..opts.clone()
    })
    .await?;
    let alone = tunnel
        .profiles
        .first()
        .and_then(|p| p.rows.first())
        .and_then(|r| r.one_stream_gbps);
    let cross = rows
        .iter()
        .find(|r| r.path.name == "across clusters")
        .and_then(|r| r.gbps);
    Ok(PathReport {
        repeats: opts.repeats,
        seconds: opts.seconds,
        rows,
        gateway_alone_gbps: alone,
        cross_over_gateway: super::report::ratio(cross.map(|c| c.median), alone.map(|a| a.median)),
    })
}

fn measure_lab(l: &Lab, opts: &Options) -> Result<Vec<PathRow>, BenchError> {
    lab::peer(l, "rome", "milan")?;
    measure_paths(paths(l)?, opts)
}

fn measure_paths(paths: Vec<Path>, opts: &Options) -> Result<Vec<PathRow>, BenchError> {
    let mut figures: Vec<Vec<Figure>> = vec![Vec::new(); paths.len()];
    let mut errors: Vec<Vec<String>> = vec![Vec::new(); paths.len()];
    for repeat in 1..=opts.repeats {
        for (i, p) in paths.iter().enumerate() {
            match measure(p, opts.seconds) {
                Ok(f) => {
                    eprintln!(
                        "[{repeat}/{}] {:<16} {:.2} Gbit/s, ping {:.0} µs",
                        opts.repeats, p.name, f.gbps, f.rtt_us
                    );
                    figures[i].push(f);
                }
                Err(e) => {
                    eprintln!("[{repeat}/{}] {:<16} FAILED: {e}", opts.repeats, p.name);
                    errors[i].push(e.to_string());
                }
            }
        }
    }
    Ok(paths
        .into_iter()
        .zip(figures.into_iter().zip(errors))
        .map(|(path, (f, errors))| PathRow {
            path,
            gbps: Spread::of(f.iter().map(|x| x.gbps)),
            rtt_us: Spread::of(f.iter().map(|x| x.rtt_us)),
            errors,
        })
        .collect())
}

/// The report for people.
pub fn render(r: &PathReport) -> String {
    use super::render::spread;
    let mut out = format!(
        "pod-to-pod, one TCP stream ({} s per test, median and range of {} repeats); RTT = ping\n\n",
        r.seconds, r.repeats
    );
    out.push_str(&format!(
        "{:<18} {:<42} {:>22} {:>16}\n",
        "PATH", "FROM -> TO (ADDRESS)", "GBIT/S", "RTT µs"
    ));
    for row in &r.rows {
        let p = &row.path;
        out.push_str(&format!(
            "{:<18} {:<42} {:>22} {:>16}\n",
            p.name,
            format!("{} -> {} ({})", p.from, p.to, p.addr),
            spread(row.gbps, 2),
            spread(row.rtt_us, 0)
        ));
        for e in &row.errors {
            out.push_str(&format!("  FAILED: {e}\n"));
        }
    }
    out.push_str(&format!(
        "{:<18} {:<42} {:>22}\n",
        "gateway alone",
        "bench tunnel, ours, unpinned",
        spread(r.gateway_alone_gbps, 2)
    ));
    match r.cross_over_gateway {
        Some(x) => {
            out.push_str(&format!(
                "\nacross clusters = {:.0}% of the gateway alone (target >= {:.0}%): {}\n",
                x * 100.0,
                TARGET_SHARE * 100.0,
                if x >= TARGET_SHARE { "met" } else { "NOT MET" }
            ));
        }
        None => out.push_str("\nno ratio: a figure is missing\n"),
    }
    let rtt = |name: &str| {
        r.rows
            .iter()
            .find(|row| row.path.name == name)
            .and_then(|row| row.rtt_us)
            .map(|s| s.median)
    };
    match (rtt("across clusters"), rtt("across nodes")) {
        (Some(c), Some(n)) => out.push_str(&format!(
            "across clusters adds {:.0} µs of RTT over across nodes (target <= {:.0} µs): {}\n",
            c - n,
            TARGET_ADDED_RTT_US,
            if c - n <= TARGET_ADDED_RTT_US {
                "met"
            } else {
                "NOT MET"
            }
        )),
        _ => out.push_str("no added RTT: a figure is missing\n"),
    }
    out
}

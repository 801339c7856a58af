//! How fast one pod reaches another: one TCP stream (iperf3) and the average of 100 pings,
//! along the three paths of a two-cluster lab (within a node, across nodes, across clusters
//! with pods on non-gateway nodes). The quickstart's speed figures; `liqo-bench path` repeats
//! them for its report.

pub mod parse;

use std::{
    net::Ipv4Addr,
    process::Stdio,
    time::{Duration, Instant},
};

use dataplane::{Netns, NetnsName, supervisor::Spec};
use serde::{Deserialize, Serialize};

use super::{Lab, LabError, peerings};

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

/// The three paths of the lab `l` (two-clusters, peered).
pub fn paths(l: &Lab) -> Result<Vec<Path>, LabError> {
    paths_with(l, &peerings(l)?)
}

/// [`paths`] with the given peerings `(cluster, peer, view)` (with control planes: the
/// TunnelEndpoints').
pub fn paths_with(
    l: &Lab,
    views: &[(String, String, liqo_types::PeerView)],
) -> Result<Vec<Path>, LabError> {
    let (_, _, view) = views
        .iter()
        .find(|(c, p, _)| c == "rome" && p == "milan")
        .ok_or_else(|| LabError::build("finding the paths", "rome and milan are not peered"))?;
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

fn listening(ns: &Netns, addr: Ipv4Addr) -> bool {
    ns.run(|| std::fs::read_to_string("/proc/thread-self/net/tcp"))
        .ok()
        .and_then(Result::ok)
        .is_some_and(|t| parse::tcp_listening(&t, addr, PORT))
}

/// Measures `p` once: iperf3 for `secs` with one stream, then 100 pings.
pub fn measure(p: &Path, secs: u32) -> Result<Figure, LabError> {
    let (Some(src), Some(dst), Some(bind)) = (&p.src, &p.dst, p.dst_own) else {
        return Err(LabError::build(
            "measuring",
            "a path read back from JSON has no namespaces",
        ));
    };
    let open =
        |n: &NetnsName| Netns::open(n).map_err(|e| LabError::build(format!("opening {n}"), e));
    let (src, dst) = (open(src)?, open(dst)?);
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
        .map_err(|e| LabError::build("starting iperf3 -s", e))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !listening(&dst, bind) {
        if Instant::now() > deadline {
            return Err(LabError::build(
                "the iperf3 server",
                "not listening after 5 s",
            ));
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
        .map_err(|e| LabError::build(&what, e.to_string()))?;
    let r = parse::iperf3_json(&String::from_utf8_lossy(&out.stdout))
        .map_err(|e| LabError::build(&what, e))?;
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
        .map_err(|e| LabError::build("ping", e.to_string()))?;
    let ping = parse::ping_summary(&String::from_utf8_lossy(&ping.stdout))
        .map_err(|e| LabError::build("ping", e))?;
    if ping.received == 0 {
        return Err(LabError::build(format!("ping {}", p.addr), "no reply"));
    }
    Ok(Figure {
        gbps: r.bits_per_second / 1e9,
        rtt_us: ping.avg_us,
    })
}

//! `liqo-lab bench offload`: seconds until all N pods of a Deployment are Running when it is
//! offloaded (`Remote`) from rome to milan through the virtual kubelet, against the same
//! Deployment on milan's own kwok nodes without Liqo, in the same run; per-pod p50/p99; the
//! memory and CPU of both liqo-controller-managers and rome's virtual kubelet at 0, 100 and N
//! pods; and the targets (≤ 1.5 × vanilla + 10 s, virtual kubelet ≤ 100 MiB).
//!
//! ```text
//!   setup:   rome (1 kwok node) + milan (12 kwok nodes), Liqo on both (milan shares 100 %),
//!            liqoctl peer, liqoctl offload namespace liqo-bench-offload --pod-offloading-strategy Remote
//!   ladder:  Deployment on rome scaled 0 -> 100 -> N; memory and CPU sampled at each level
//!   timed:   per repeat, both orders alternating: create N replicas on milan (vanilla) /
//!            on rome (Liqo), watch until N Running, delete every pod
//! ```
//!
//! It owns only the measuring: the clusters are the harness's ([`crate::k8s`]), Liqo is
//! [`crate::liqo`]'s install, peering and offloading are liqoctl's own commands. The clusters
//! are named `<prefix>ob` (a set of their own); they are stopped at the end, on failure and on
//! Ctrl-C, and a set left by a crashed run is removed first.

pub mod render;
pub mod report;
mod setup;
mod track;
mod workload;

use std::time::{Duration, Instant};

use kube::Client;
pub use render::render;
pub use report::{Latency, Level, OffloadReport, Phase, Side};

use super::{BenchError, measure::LoadTracker, report::Tool, run};
use crate::{
    k8s::{self, Clusters, Named},
    lab::Prefix,
    liqo,
};
use setup::{Procs, Setup};

/// Pods a harness kwok node takes.
pub const PODS_PER_NODE: u32 = 110;
/// Replicas by default.
pub const DEFAULT_PODS: u32 = 1000;
/// milan's kwok nodes by default (12 × 110 pods cover 1,000 with room).
pub const DEFAULT_PROVIDER_NODES: usize = 12;
/// The offloaded namespace on rome.
pub const OFFLOADED: &str = "liqo-bench-offload";
/// The vanilla Deployment's namespace on milan.
pub const VANILLA: &str = "liqo-bench-vanilla";
/// The ladder's middle level.
const LADDER_MID: u32 = 100;

/// What to run.
#[derive(Debug, Clone)]
pub struct OffloadOptions {
    /// The bench's clusters are `<prefix>ob`.
    pub prefix: Prefix,
    /// Replicas of the Deployment.
    pub pods: u32,
    /// milan's kwok nodes.
    pub provider_nodes: usize,
    /// rome's kwok nodes.
    pub consumer_nodes: usize,
    /// Timed runs per side (the median is reported).
    pub repeats: u32,
    /// Seconds each wait (all Running, a cleanup, a setup step) may take.
    pub timeout_secs: u64,
}

impl OffloadOptions {
    /// Checks the numbers.
    pub fn validate(self) -> Result<OffloadOptions, BenchError> {
        let bad = |s: String| Err(BenchError::Options(s));
        if !(1..=10_000).contains(&self.pods) {
            return bad(format!("--pods {} is outside 1..=10000", self.pods));
        }
        if !(1..=50).contains(&self.provider_nodes) || !(1..=50).contains(&self.consumer_nodes) {
            return bad(format!(
                "--provider-nodes {} and --consumer-nodes {} must be within 1..=50",
                self.provider_nodes, self.consumer_nodes
            ));
        }
        let room = self.provider_nodes as u32 * PODS_PER_NODE;
        if self.pods > room {
            return bad(format!(
                "--pods {} does not fit on --provider-nodes {} ({} x {PODS_PER_NODE} = {room} \
                 pods); add nodes",
                self.pods, self.provider_nodes, self.provider_nodes
            ));
        }
        if !(1..=20).contains(&self.repeats) {
            return bad(format!("--repeats {} is outside 1..=20", self.repeats));
        }
        if !(10..=7200).contains(&self.timeout_secs) {
            return bad(format!(
                "--timeout {} is outside 10..=7200 seconds",
                self.timeout_secs
            ));
        }
        self.cluster_prefix()?;
        Ok(self)
    }

    /// The prefix of the bench's clusters.
    pub fn cluster_prefix(&self) -> Result<Prefix, BenchError> {
        format!("{}ob", self.prefix).parse().map_err(|_| {
            BenchError::Options(format!(
                "--prefix {} is too long for the bench's clusters ({}ob must be at most 10 \
                 characters)",
                self.prefix, self.prefix
            ))
        })
    }

    /// The pod counts the ladder samples at.
    pub fn ladder(&self) -> Vec<u32> {
        let mut l = vec![0, LADDER_MID.min(self.pods), self.pods];
        l.dedup();
        l
    }
}

/// Runs `liqo-lab bench offload`. Progress goes to stderr. A side that does not reach all
/// Running within the timeout is an error. Everything started is stopped before this returns,
/// also on error and on SIGINT or SIGTERM.
pub async fn offload(opts: OffloadOptions) -> Result<OffloadReport, BenchError> {
    let opts = opts.validate()?;
    let prefix = opts.cluster_prefix()?;
    let d = k8s::down(&prefix).map_err(|e| BenchError::step("removing an earlier run", &e))?;
    if d.stopped > 0 {
        eprintln!(
            "bench: removed the clusters of an earlier run ({} processes)",
            d.stopped
        );
    }
    let r = run::interruptible(bench(opts, prefix.clone(), run::now())).await;
    if let Err(e) = k8s::down(&prefix) {
        eprintln!("bench: stopping clusters {prefix}: {e}");
    }
    r
}

/// The clusters, Liqo on them, and what the runs share.
struct Bed {
    /// Held so that the clusters live as long as the bed (dropping it stops them).
    _set: Clusters,
    installed: liqo::Liqo,
    rome: Client,
    milan: Client,
    remote_ns: String,
    procs: Procs,
    timeout: Duration,
}

async fn bench(
    opts: OffloadOptions,
    prefix: Prefix,
    date: String,
) -> Result<OffloadReport, BenchError> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let timeout = Duration::from_secs(opts.timeout_secs);
    let bins = k8s::binaries().map_err(|e| BenchError::step("the Kubernetes binaries", &e))?;
    eprintln!(
        "bench: starting clusters {prefix} (rome {} kwok node(s), milan {})",
        opts.consumer_nodes, opts.provider_nodes
    );
    let t = Instant::now();
    let named = |i: u8, name: &str, nodes: usize| Named {
        name: name.into(),
        pod_cidr: ipnet::Ipv4Net::new([10, 244 + i, 0, 0].into(), 16).expect("a /16"),
        service_cidr: ipnet::Ipv4Net::new([10, 96 + i, 0, 0].into(), 16).expect("a /16"),
        nodes,
    };
    let set = Clusters::up_named(
        &bins,
        &prefix,
        &[
            named(0, "rome", opts.consumer_nodes),
            named(1, "milan", opts.provider_nodes),
        ],
    )
    .await
    .map_err(|e| BenchError::step("starting the clusters", &e))?;
    let clusters_up_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut lopts = liqo::Options {
        virtual_kubelet: liqo::VkMode::Process,
        ..liqo::Options::default()
    };
    lopts.sharing_percentage.insert("milan".into(), 100);
    let installed = liqo::install(&set, &bins, &lopts)
        .await
        .map_err(|e| BenchError::step("installing Liqo", &e))?;
    let install_secs = t.elapsed().as_secs_f64();
    let client = |name: &'static str| {
        let c = set.get(name).map(|c| c.client());
        async move {
            match c {
                Some(f) => f
                    .await
                    .map_err(|e| BenchError::step(format!("a client of {name}"), &e)),
                None => Err(BenchError::Options(format!("no cluster {name}"))),
            }
        }
    };
    let (rome, milan) = (client("rome").await?, client("milan").await?);
    let manager = |name: &str| {
        installed
            .get(name)
            .and_then(|i| i.get("liqo-controller-manager"))
            .map(|r| r.proc.pid)
            .ok_or_else(|| BenchError::Options(format!("no liqo-controller-manager on {name}")))
    };
    let procs = Procs::new(manager("rome")?, manager("milan")?);
    eprintln!(
        "bench: clusters up in {clusters_up_secs:.1} s, Liqo installed in {install_secs:.1} s"
    );

    let rome_kubeconfig = set
        .get("rome")
        .map(|c| c.kubeconfig.clone())
        .unwrap_or_default();
    let s = Setup {
        liqoctl: installed.bin.join("liqoctl"),
        kubeconfig: &set.kubeconfig,
        rome_kubeconfig: &rome_kubeconfig,
        timeout,
    };
    let t = Instant::now();
    s.peer().await?;
    let vnode_pods = setup::virtual_node_pods(&rome, u64::from(opts.pods), timeout).await?;
    let peering_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let remote_ns = s.offload(&rome, OFFLOADED).await?;
    let offload_secs = t.elapsed().as_secs_f64();
    eprintln!(
        "bench: peered in {peering_secs:.1} s ({setup_vn} with {vnode_pods} pods), {OFFLOADED} \
         offloaded to milan's {remote_ns} in {offload_secs:.1} s",
        setup_vn = setup::VIRTUAL_NODE
    );
    workload::create_namespace(&milan, VANILLA).await?;
    workload::service_account(&rome, OFFLOADED, timeout).await?;
    workload::service_account(&milan, VANILLA, timeout).await?;
    let kubernetes = rome
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .map_err(|e| BenchError::step("the apiserver's version", &e))?;
    let bed = Bed {
        _set: set,
        installed,
        rome,
        milan,
        remote_ns,
        procs,
        timeout,
    };
    let tools = tools(&bed.installed);
    let (phases, levels, load) = measure(&bed, &opts).await.map_err(|e| match e {
        BenchError::Step { what, detail } => BenchError::Step {
            what,
            detail: format!(
                "{detail}\nthe end of the controller-managers' logs:\n{}",
                bed.log_tails()
            ),
        },
        e => e,
    })?;
    let header = report::Header {
        date,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
        cpus,
        cpu_model: cpu_model(),
        kubernetes,
        debug_build: tools.iter().any(|t| t.path.contains("/debug/")),
        tools,
        pods: opts.pods,
        provider_nodes: opts.provider_nodes,
        consumer_nodes: opts.consumer_nodes,
        repeats: opts.repeats,
        clusters_up_secs,
        install_secs,
        peering_secs,
        offload_secs,
        virtual_node_pods: Some(vnode_pods),
        background_load_max_pct: load.max_pct,
        background_wait_secs: load.waited.as_secs_f64(),
    };
    drop(bed);
    Ok(OffloadReport::new(header, phases, levels))
}

/// The ladder, then the timed runs.
async fn measure(
    bed: &Bed,
    opts: &OffloadOptions,
) -> Result<(Vec<Phase>, Vec<Level>, LoadTracker), BenchError> {
    let levels = bed.ladder(&opts.ladder()).await?;
    let mut load = LoadTracker::default();
    let mut phases = Vec::new();
    let mut progress = run::Progress::new(2 * opts.repeats as usize);
    for repeat in 1..=opts.repeats {
        let order = if repeat % 2 == 1 {
            [Side::Vanilla, Side::Liqo]
        } else {
            [Side::Liqo, Side::Vanilla]
        };
        for side in order {
            let p = bed.timed(side, repeat, opts.pods, &mut load).await?;
            eprintln!(
                "{} {} run {repeat}: {:.2} s to {} Running, scheduled->Ready p50 {} ms p99 {} ms",
                progress.step(),
                side.label(),
                p.secs,
                p.pods,
                p.scheduled_to_ready.map_or(0.0, |l| l.p50_ms).round(),
                p.scheduled_to_ready.map_or(0.0, |l| l.p99_ms).round(),
            );
            phases.push(p);
        }
    }
    Ok((phases, levels, load))
}

impl Bed {
    /// The client and namespace of `side`'s Deployment, and the remote side of its pods.
    fn place(&self, side: Side) -> (&Client, &str, Option<(&Client, &str)>) {
        match side {
            Side::Vanilla => (&self.milan, VANILLA, None),
            Side::Liqo => (
                &self.rome,
                OFFLOADED,
                Some((&self.milan, self.remote_ns.as_str())),
            ),
        }
    }

    /// The offloaded Deployment scaled through `counts`, the processes sampled at each.
    async fn ladder(&self, counts: &[u32]) -> Result<Vec<Level>, BenchError> {
        let (client, ns, remote) = self.place(Side::Liqo);
        let mut watch = workload::PodWatch::open(client, ns).await?;
        workload::create(client, ns, 0).await?;
        let mut levels = Vec::new();
        for &n in counts {
            let secs = if n == 0 {
                0.0
            } else {
                setup::virtual_node_pods(client, u64::from(n), self.timeout).await?;
                watch.restart_clock();
                workload::scale(client, ns, n).await?;
                watch.until_running(n as usize, self.timeout).await?
            };
            let processes = self.procs.usage()?;
            eprintln!(
                "bench: ladder at {n} pods ({secs:.1} s): {}",
                usage_line(&processes)
            );
            levels.push(Level {
                pods: n,
                secs,
                processes,
            });
        }
        workload::clear(client, ns, remote, self.timeout).await?;
        Ok(levels)
    }

    /// One timed run of `side`; every pod is deleted afterwards.
    async fn timed(
        &self,
        side: Side,
        repeat: u32,
        pods: u32,
        load: &mut LoadTracker,
    ) -> Result<Phase, BenchError> {
        let (client, ns, remote) = self.place(side);
        if side == Side::Liqo {
            // milan's offer counts its free pods: after a vanilla run it takes a moment to grow.
            setup::virtual_node_pods(client, u64::from(pods), self.timeout).await?;
        }
        let background_load_pct = load.quiet().await?;
        let mut watch = workload::PodWatch::open(client, ns).await?;
        let cpu0 = self.procs.cpu()?;
        watch.restart_clock();
        workload::create(client, ns, pods).await?;
        let secs = watch.until_running(pods as usize, self.timeout).await?;
        let cpu = setup::cpu_delta(&cpu0, &self.procs.cpu()?);
        let t = watch.tracker();
        let phase = Phase {
            side,
            repeat,
            pods,
            secs,
            created_to_running: t.created_to_running(),
            scheduled_to_ready: t.scheduled_to_ready(),
            cpu,
            background_load_pct,
        };
        workload::clear(client, ns, remote, self.timeout).await?;
        Ok(phase)
    }

    /// The last lines of both controller-managers' logs (they go with the clusters).
    fn log_tails(&self) -> String {
        let mut out = String::new();
        for i in &self.installed.clusters {
            if let Some(r) = i.get("liqo-controller-manager") {
                let text = std::fs::read_to_string(&r.proc.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                out.push_str(&format!(
                    "--- liqo-controller-manager of {} ({}):\n",
                    i.cluster, r.proc.log
                ));
                for l in &lines[lines.len().saturating_sub(10)..] {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

fn usage_line(ps: &[report::ProcUsage]) -> String {
    ps.iter()
        .map(|p| {
            format!(
                "{} {:.1} MiB, {:.1} CPU s",
                p.process,
                p.rss_mib(),
                p.cpu_secs
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The CPU model from `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Our binaries that took part, with their `--version`.
fn tools(installed: &liqo::Liqo) -> Vec<Tool> {
    let mut paths = vec![("liqoctl", installed.bin.join("liqoctl"))];
    for p in ["liqo-controller-manager", "liqo-virtual-kubelet"] {
        if let Ok(path) = crate::lab::bin(p) {
            paths.push((p, path));
        }
    }
    paths
        .into_iter()
        .map(|(name, link)| {
            let path = std::fs::canonicalize(&link).unwrap_or(link);
            Tool {
                name: name.into(),
                version: setup::version(&path),
                path: path.display().to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pods: u32, nodes: usize) -> OffloadOptions {
        OffloadOptions {
            prefix: "lq".parse().unwrap(),
            pods,
            provider_nodes: nodes,
            consumer_nodes: 1,
            repeats: 1,
            timeout_secs: 600,
        }
    }

    #[test]
    fn the_pods_must_fit_on_the_provider_and_the_prefix_leaves_room() {
        assert!(opts(1000, 12).validate().is_ok());
        let e = opts(1000, 9).validate().unwrap_err().to_string();
        assert!(
            e.contains("--pods 1000 does not fit on --provider-nodes 9 (9 x 110 = 990"),
            "{e}"
        );
        assert!(opts(0, 12).validate().is_err());
        let mut r = opts(10, 1);
        r.repeats = 0;
        assert!(r.validate().is_err());
        assert_eq!(opts(10, 1).cluster_prefix().unwrap().to_string(), "lqob");
        let mut long = opts(10, 1);
        long.prefix = "abcdefghij".parse().unwrap();
        let e = long.validate().unwrap_err().to_string();
        assert!(e.contains("--prefix abcdefghij is too long"), "{e}");
    }

    #[test]
    fn the_ladder_is_0_100_and_all() {
        assert_eq!(opts(1000, 12).ladder(), [0, 100, 1000]);
        assert_eq!(opts(100, 12).ladder(), [0, 100]);
        assert_eq!(opts(20, 1).ladder(), [0, 20]);
    }
}

//! The results of `liqo-bench offload`: the timed runs of both sides, their summary, the ratio
//! and the targets, the processes' memory and CPU at each pod count, and the notes, on the
//! report core ([`crate::report_core`]). Pure: built from the measurements, serialized for `-o json`,
//! rendered by [`mod@super::render`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::track::{Breakdown, Latency};
use crate::report_core::{Header, Spread, Target, ratio};

/// The time target: Liqo's seconds ≤ `TIME_FACTOR` × vanilla + [`TIME_SLACK_SECS`].
pub const TIME_FACTOR: f64 = 1.1;
/// See [`TIME_FACTOR`] (a small run's seconds are a few).
pub const TIME_SLACK_SECS: f64 = 2.0;

/// Liqo's time target given vanilla's (median) seconds.
pub fn time_target(vanilla_secs: f64) -> f64 {
    TIME_FACTOR * vanilla_secs + TIME_SLACK_SECS
}

/// The virtual kubelet's resident memory target at up to [`SMALL_PODS`] pods, MiB.
pub const VK_RSS_TARGET_MIB: f64 = 50.0;
/// The controller-manager's resident memory target at up to [`SMALL_PODS`] pods, MiB.
pub const CM_RSS_TARGET_MIB: f64 = 60.0;
/// Above this many pods, each process's target is [`LARGE_RSS_TARGET_MIB`].
pub const SMALL_PODS: u32 = 1000;
/// Each process's resident memory target above [`SMALL_PODS`] (up to 10,000), MiB.
pub const LARGE_RSS_TARGET_MIB: f64 = 150.0;

/// How the after-timed sample waits for rest (`super::settle`; here, so the notes can say
/// it): Liqo's processes are quiet when together they used less than this in a `QUIET_SPAN`.
pub(crate) const QUIET_CPU_SECS: f64 = 0.15;
/// The span over which quiet is judged.
pub(crate) const QUIET_SPAN: Duration = Duration::from_secs(5);
/// Waited at most for quiet.
pub(crate) const SETTLE_MAX: Duration = Duration::from_secs(60);
/// Waited once quiet (or at `SETTLE_MAX`), before memory is sampled: two of the
/// allocator's forced collects per parking thread (`liqo_daemon::memory::FORCE_EVERY`, 10 s).
pub(crate) const REST: Duration = Duration::from_secs(20);

/// After every pod is deleted, each process's memory is within this factor of its idle one.
pub const BACK_TO_IDLE: f64 = 1.2;

const KIB_PER_MIB: f64 = 1024.0;

/// Where the Deployment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// On the provider's own kwok nodes, without Liqo.
    Vanilla,
    /// On the consumer, offloaded (`Remote`) to the provider through the virtual node.
    Liqo,
}

impl Side {
    /// Its short name.
    pub fn short(self) -> &'static str {
        match self {
            Side::Vanilla => "vanilla",
            Side::Liqo => "Liqo",
        }
    }

    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            Side::Vanilla => "vanilla (milan's kwok nodes)",
            Side::Liqo => "Liqo (rome -> liqo-milan -> milan)",
        }
    }
}

/// CPU seconds of one process over a span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcCpu {
    /// Which process (program and cluster).
    pub process: String,
    /// user + system seconds (the row of the time some task waited for a CPU: those seconds).
    pub cpu_secs: f64,
}

/// One timed run: the Deployment created with every replica, until all are Running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    /// Which side.
    pub side: Side,
    /// Which repeat (1-based).
    pub repeat: u32,
    /// Replicas.
    pub pods: u32,
    /// Seconds from the create request to the watch showing every pod Running.
    pub secs: f64,
    /// Per pod: first seen → first seen Running.
    pub created_to_running: Option<Latency>,
    /// Per pod: first seen scheduled → first seen Ready.
    pub scheduled_to_ready: Option<Latency>,
    /// Where an offloaded pod's time goes (the Liqo side).
    #[serde(default)]
    pub breakdown: Option<Breakdown>,
    /// CPU of Liqo's processes during the run.
    pub cpu: Vec<ProcCpu>,
    /// Background CPU load when it started, percent.
    pub background_load_pct: f64,
    /// The requests of the run (from the create until every pod was gone), per client and
    /// per pod, on each API server.
    #[serde(default)]
    pub requests: Vec<super::requests::ClientRequests>,
    /// The virtual kubelet killed and started again at the end of the run (the last Liqo
    /// run).
    #[serde(default)]
    pub restart: Option<super::restart::VkRestart>,
}

/// One process's memory and CPU at one pod count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcUsage {
    /// Which process (program and cluster).
    pub process: String,
    /// Its pid.
    pub pid: u32,
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM` (peak resident set so far), KiB.
    pub hwm_kib: u64,
    /// `RssFile`, KiB: the part of `VmRSS` mapped from files (the program's code as far as it
    /// has run), which no allocator gives back; `None` when not read.
    #[serde(default)]
    pub file_kib: Option<u64>,
    /// user + system seconds since it started.
    pub cpu_secs: f64,
}

impl ProcUsage {
    /// `VmRSS`, MiB.
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / KIB_PER_MIB
    }

    /// `VmHWM`, MiB.
    pub fn hwm_mib(&self) -> f64 {
        self.hwm_kib as f64 / KIB_PER_MIB
    }

    /// `RssFile`, MiB.
    pub fn file_mib(&self) -> Option<f64> {
        self.file_kib.map(|k| k as f64 / KIB_PER_MIB)
    }
}

/// The processes once the offloaded Deployment was scaled to `pods` and all were Running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Level {
    /// Home pods Running.
    pub pods: u32,
    /// Seconds from the scale request to all Running (0 for the first level); after the
    /// timed runs, the seconds waited for the processes to rest.
    pub secs: f64,
    /// Sampled after the timed runs (every pod deleted again), not on the ladder.
    #[serde(default)]
    pub after_timed: bool,
    /// After the timed runs: the processes were quiet before the sample (else the wait's
    /// limit passed first).
    #[serde(default)]
    pub quiet: bool,
    /// Each process measured.
    pub processes: Vec<ProcUsage>,
}

/// One side over the repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SideSummary {
    /// Which side.
    pub side: Side,
    /// Seconds to all Running over the repeats.
    pub secs: Option<Spread>,
    /// Per-pod first seen → Running: the median over the repeats of each percentile (the
    /// largest max).
    pub created_to_running: Option<Latency>,
    /// Per-pod scheduled → Ready, the same way.
    pub scheduled_to_ready: Option<Latency>,
    /// Where an offloaded pod's time goes, the same way (the Liqo side).
    #[serde(default)]
    pub breakdown: Option<Breakdown>,
}

fn merge(l: &[Latency]) -> Option<Latency> {
    let med = |f: fn(&Latency) -> f64| Spread::of(l.iter().map(f)).map(|s| s.median);
    Some(Latency {
        pods: l.iter().map(|x| x.pods).sum(),
        p50_ms: med(|x| x.p50_ms)?,
        p99_ms: med(|x| x.p99_ms)?,
        max_ms: l.iter().map(|x| x.max_ms).fold(f64::MIN, f64::max),
    })
}

impl SideSummary {
    /// The summary of `side`'s runs among `phases`.
    pub fn new(side: Side, phases: &[Phase]) -> SideSummary {
        let mine: Vec<&Phase> = phases.iter().filter(|p| p.side == side).collect();
        let lat = |f: fn(&Phase) -> Option<Latency>| {
            merge(&mine.iter().filter_map(|p| f(p)).collect::<Vec<_>>())
        };
        let parts: Vec<Breakdown> = mine.iter().filter_map(|p| p.breakdown).collect();
        let part = |f: fn(&Breakdown) -> Option<Latency>| {
            merge(&parts.iter().filter_map(f).collect::<Vec<_>>())
        };
        SideSummary {
            side,
            secs: Spread::of(mine.iter().map(|p| p.secs)),
            created_to_running: lat(|p| p.created_to_running),
            scheduled_to_ready: lat(|p| p.scheduled_to_ready),
            breakdown: (!parts.is_empty()).then(|| Breakdown {
                to_remote: part(|b| b.to_remote),
                remote_running: part(|b| b.remote_running),
                back_home: part(|b| b.back_home),
            }),
        }
    }
}

/// How the run was done, besides the core header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    /// The Kubernetes version the apiservers report.
    pub kubernetes: String,
    /// Replicas of the Deployment.
    pub pods: u32,
    /// milan's kwok nodes.
    pub provider_nodes: usize,
    /// rome's kwok nodes.
    pub consumer_nodes: usize,
    /// Timed runs per side.
    pub repeats: u32,
    /// Only the vanilla side ran (`--vanilla-only`).
    #[serde(default)]
    pub vanilla_only: bool,
    /// Seconds to start the clusters, to install Liqo, to peer (liqoctl peer → virtual node
    /// Ready) and to offload the namespace (`liqoctl offload namespace`).
    pub clusters_up_secs: f64,
    /// See `clusters_up_secs`.
    pub install_secs: f64,
    /// See `clusters_up_secs`.
    pub peering_secs: f64,
    /// See `clusters_up_secs`.
    pub offload_secs: f64,
    /// The virtual node's allocatable pods when the first Liqo run started.
    pub virtual_node_pods: Option<u64>,
}

/// Everything one `liqo-bench offload` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffloadReport {
    /// How and on what.
    pub header: Header,
    /// The Deployment, the clusters and how long setting them up took.
    pub setup: Setup,
    /// The Deployment on milan without Liqo.
    pub vanilla: SideSummary,
    /// The Deployment on rome, offloaded to milan.
    pub liqo: SideSummary,
    /// Liqo's median seconds / vanilla's.
    pub ratio: Option<f64>,
    /// The time target, the virtual kubelet's and the controller-managers' memory.
    pub targets: Vec<Target>,
    /// The processes at 0, 100 and all pods.
    pub levels: Vec<Level>,
    /// Every timed run.
    pub phases: Vec<Phase>,
    /// How to read the figures.
    pub notes: Vec<String>,
}

/// The process name of the virtual kubelet in [`ProcUsage::process`].
pub const VK: &str = "liqo-virtual-kubelet (rome -> milan)";
/// The process name of a cluster's controller-manager.
pub fn manager(cluster: &str) -> String {
    format!("liqo-controller-manager ({cluster})")
}

impl OffloadReport {
    /// Summarizes the runs and checks the targets.
    pub fn new(
        header: Header,
        setup: Setup,
        phases: Vec<Phase>,
        levels: Vec<Level>,
    ) -> OffloadReport {
        let vanilla = SideSummary::new(Side::Vanilla, &phases);
        let liqo = SideSummary::new(Side::Liqo, &phases);
        let (v, l) = (vanilla.secs.map(|s| s.median), liqo.secs.map(|s| s.median));
        let ratio = ratio(l, v);
        let full = levels
            .iter()
            .find(|x| x.pods == setup.pods && !x.after_timed);
        let rss = |process: &str| {
            full.and_then(|x| x.processes.iter().find(|p| p.process == process))
                .map(ProcUsage::rss_mib)
        };
        let pods = setup.pods;
        let mut targets = vec![
            Target::at_most(
                format!(
                    "Liqo seconds <= {TIME_FACTOR} x vanilla + {TIME_SLACK_SECS:.0} s ({pods} pods)"
                ),
                l,
                v.map(time_target),
                "s",
            ),
            Target::at_most(
                format!("liqo-virtual-kubelet VmRSS at {pods} pods"),
                rss(VK),
                Some(if pods > SMALL_PODS {
                    LARGE_RSS_TARGET_MIB
                } else {
                    VK_RSS_TARGET_MIB
                }),
                "MiB",
            ),
        ];
        for c in ["rome", "milan"] {
            targets.push(Target::at_most(
                format!("liqo-controller-manager ({c}) VmRSS at {pods} pods"),
                rss(&manager(c)),
                Some(if pods > SMALL_PODS {
                    LARGE_RSS_TARGET_MIB
                } else {
                    CM_RSS_TARGET_MIB
                }),
                "MiB",
            ));
        }
        // Memory given back: after every pod is deleted, within BACK_TO_IDLE of idle.
        let at = |idle: bool, process: &str| {
            levels
                .iter()
                .find(|x| x.pods == 0 && x.after_timed != idle)
                .and_then(|x| x.processes.iter().find(|p| p.process == process))
                .map(ProcUsage::rss_mib)
        };
        for process in [VK.to_owned(), manager("rome"), manager("milan")] {
            targets.push(Target::at_most(
                format!("{process} VmRSS once every pod is deleted, <= {BACK_TO_IDLE} x idle"),
                at(false, &process),
                at(true, &process).map(|idle| idle * BACK_TO_IDLE),
                "MiB",
            ));
        }
        let notes = notes(&header, &setup, &levels);
        OffloadReport {
            header,
            setup,
            vanilla,
            liqo,
            ratio,
            targets,
            levels,
            phases,
            notes,
        }
    }

    /// Every side that ran (both, or vanilla alone with `--vanilla-only`) reached every pod
    /// Running in every repeat.
    pub fn complete(&self) -> bool {
        let runs = |s: Side| self.phases.iter().filter(|p| p.side == s).count();
        let liqo = if self.setup.vanilla_only {
            0
        } else {
            self.setup.repeats as usize
        };
        runs(Side::Vanilla) == self.setup.repeats as usize && runs(Side::Liqo) == liqo
    }
}

/// What the figures are and are not.
fn notes(h: &Header, s: &Setup, levels: &[Level]) -> Vec<String> {
    let mut out = vec![
        format!(
            "timed run: a Deployment of {} replicas (one container, requests cpu 1m and \
             memory 1Mi, so the capacity is bound by pods) is created; the clock starts just \
             before the create request and stops when a pod watch (opened before) shows all \
             of them Running. Vanilla: on milan, scheduled on its {} kwok node(s). Liqo: on \
             rome, in a namespace offloaded with `liqoctl offload namespace \
             --pod-offloading-strategy Remote`: rome's scheduler binds every pod to the \
             virtual node liqo-milan, the virtual kubelet writes a ShadowPod on milan, milan's \
             controller-manager creates the pod, milan's scheduler and kwok run it, and the \
             virtual kubelet copies its status back to the home pod, which is what is timed",
            s.pods, s.provider_nodes
        ),
        "both sides in the same run on the same clusters (one machine): pods are created by \
         each cluster's kube-controller-manager (ReplicaSet controller, client limit 20 qps / \
         burst 30 by default), so the same creation floor bounds both; between runs every \
         pod is deleted (grace 0) and the next run waits until milan has none of them left"
            .into(),
        "per-pod latencies are times at which the bench's own watch first saw each state \
         (first seen → Running; scheduled → Ready), not the conditions' timestamps: those \
         have one-second resolution, and a home pod's are copied from the remote pod"
            .into(),
        "Liqo, per pod: a second watch, on milan's remote namespace, runs on the same clock, \
         and each home pod is matched to its remote pod by name: home scheduled -> remote pod \
         first seen, remote first seen -> remote Running, remote Running -> home Running"
            .into(),
        "memory and CPU: VmRSS, its part mapped from files (RssFile: the program's code as \
         far as it has run, clean pages no allocator gives back) and VmHWM from \
         /proc/<pid>/status, CPU user+system from \
         /proc/<pid>/stat, of both liqo-controller-managers and rome's liqo-virtual-kubelet \
         (a child process of rome's controller-manager), sampled before the timed runs while \
         the offloaded Deployment is scaled 0 -> 100 -> all, each level once all its home \
         pods are Running (then it is deleted)"
            .into(),
        "CPU s during a timed run: also each cluster's own processes (etcd, kube-apiserver, \
         kube-controller-manager, kube-scheduler, kwok; each a Go program limited to one CPU, \
         GOMAXPROCS=1, so about one CPU second per second is its ceiling) and the machine's busy \
         time over all its CPUs (/proc/stat): a process near its ceiling bounds the run; \
         and the seconds during which some task waited for a CPU (/proc/pressure/cpu, the \
         kernel's CPU pressure): near the run's length, each pod's steps queued for a CPU \
         whichever process took them, and its latency is the machine's"
            .into(),
    ];
    if s.vanilla_only {
        out.push(
            "--vanilla-only: Liqo was not installed; only the vanilla side ran (the harness's \
             own floor), so no ratio, no target and no process is measured"
                .into(),
        );
    }
    if let Some(after) = levels.iter().find(|l| l.after_timed) {
        let rest = if after.quiet {
            format!(
                "once Liqo's processes were quiet (together under {QUIET_CPU_SECS} CPU s in {} \
                 s)",
                QUIET_SPAN.as_secs()
            )
        } else {
            format!(
                "with Liqo's processes NOT quiet after {} s (together {QUIET_CPU_SECS} CPU s \
                 or more in every {} s)",
                SETTLE_MAX.as_secs(),
                QUIET_SPAN.as_secs()
            )
        };
        out.push(format!(
            "the last row of each process (\"0 after timed\") was sampled after the timed \
             runs, once every pod was deleted, {rest}, then {} s more for their allocator's \
             forced collects: {:.0} s after the last run; its VmHWM is the peak over the \
             whole run, its CPU since previous the timed runs' (both sides)",
            REST.as_secs(),
            after.secs
        ));
    }
    if levels
        .iter()
        .any(|l| !l.processes.iter().any(|p| p.process == VK))
    {
        out.push(
            "no liqo-virtual-kubelet child process of rome's controller-manager was found at \
             some level (virtual kubelet in-process?): its rows are missing there"
                .into(),
        );
    }
    out.extend(h.debug_note());
    if s.repeats < 3 {
        out.push(format!(
            "{} timed run(s) per side: no median of 3 (use --repeats 3 for the spec's figure)",
            s.repeats
        ));
    }
    if h.load.max_pct > 15.0 {
        out.push(format!(
            "background CPU load reached {:.0}% at the start of a timed run (this counts the \
             bench's own clusters and anything else on the machine): figures may be high",
            h.load.max_pct
        ));
    }
    out.push(
        "upstream Liqo cannot run here (no container runtime); the seed's ballpark for it \
         (Go v0.5): < 0.5 CPU transient and < 200 MB RAM at 100 pods"
            .into(),
    );
    out
}

#[cfg(test)]
pub(crate) mod tests;

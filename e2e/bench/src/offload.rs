//! `liqo-bench offload`: seconds until all N pods of a Deployment are Running when it is
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
//! It owns only the measuring: the clusters are the harness's ([`e2e::k8s`]), Liqo is
//! [`e2e::liqo`]'s install, peering and offloading are liqoctl's own commands. The clusters
//! are named `<prefix>ob` (a set of their own); they are stopped at the end, on failure and on
//! Ctrl-C, and a set left by a crashed run is removed first.

mod bed;
pub mod render;
pub mod report;
mod setup;
mod track;
mod workload;

use std::time::Instant;

use bed::Bed;
pub use render::render;
pub use report::{Latency, Level, OffloadReport, Phase, Side};

use super::{
    BenchError,
    report_core::{Header, liqo_tools},
    run,
};
use e2e::{
    k8s::{self, Clusters, Named},
    lab::Prefix,
};

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
    /// Only the vanilla side: no Liqo is installed (the harness's own floor).
    pub vanilla_only: bool,
    /// The virtual kubelet's pod reflection workers (`None`: the default).
    pub vk_workers: Option<usize>,
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
        run::cluster_prefix(&self.prefix, "ob")
    }

    /// The pod counts the ladder samples at.
    pub fn ladder(&self) -> Vec<u32> {
        let mut l = vec![0, LADDER_MID.min(self.pods), self.pods];
        l.dedup();
        l
    }
}

/// Runs `liqo-bench offload`. Progress goes to stderr. A side that does not reach all
/// Running within the timeout is an error. Everything started is stopped before this returns,
/// also on error and on SIGINT or SIGTERM.
pub async fn offload(opts: OffloadOptions) -> Result<OffloadReport, BenchError> {
    let opts = opts.validate()?;
    let prefix = opts.cluster_prefix()?;
    run::on_own_clusters(&prefix, bench(opts, prefix.clone(), Header::now())).await
}

async fn bench(
    opts: OffloadOptions,
    prefix: Prefix,
    mut header: Header,
) -> Result<OffloadReport, BenchError> {
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
    eprintln!("bench: clusters up in {clusters_up_secs:.1} s");
    let (bed, setup) = Bed::new(set, &bins, &opts).await?;
    let kubernetes = bed
        .rome()
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .map_err(|e| BenchError::step("the apiserver's version", &e))?;
    header.tools = bed
        .liqo
        .as_ref()
        .map(|l| {
            liqo_tools(
                &l.installed,
                &["liqo-controller-manager", "liqo-virtual-kubelet"],
            )
        })
        .unwrap_or_default();
    let (phases, levels, load) = bed.measure(&opts).await.map_err(|e| match e {
        BenchError::Step { what, detail } => BenchError::Step {
            what,
            detail: format!(
                "{detail}\nthe end of the controller-managers' logs:\n{}",
                bed.log_tails()
            ),
        },
        e => e,
    })?;
    header.load = load.seen();
    let setup = report::Setup {
        kubernetes,
        pods: opts.pods,
        provider_nodes: opts.provider_nodes,
        consumer_nodes: opts.consumer_nodes,
        repeats: opts.repeats,
        vanilla_only: opts.vanilla_only,
        clusters_up_secs,
        install_secs: setup.install,
        peering_secs: setup.peering,
        offload_secs: setup.offload,
        virtual_node_pods: setup.virtual_node_pods,
    };
    drop(bed);
    Ok(OffloadReport::new(header, setup, phases, levels))
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
            vanilla_only: false,
            vk_workers: None,
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

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

pub(crate) mod bed;
pub mod floor;
mod options;
pub mod render;
pub mod report;
pub mod requests;
pub mod restart;
mod settle;
pub(crate) mod setup;
mod track;
mod workload;

use std::time::Instant;

use bed::Bed;
pub use options::{
    DEFAULT_PODS, DEFAULT_PROVIDER_NODES, OFFLOADED, OffloadOptions, PODS_PER_NODE, VANILLA,
    provider_nodes_for, timeout_for,
};
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
        advertise: None,
        egress: None,
        public: Vec::new(),
        // Requests per pod are counted from the API servers' audit logs.
        audit: true,
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

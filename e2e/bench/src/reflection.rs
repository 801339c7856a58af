//! `liqo-bench reflection`: how fast a namespace's objects reach the provider through the
//! virtual kubelet's resource reflection, and whether it converges after a `kill -9`.
//!
//! ```text
//!   setup:    rome + milan (1 kwok node each), Liqo on both (virtual kubelets as processes),
//!             liqoctl peer, liqoctl offload namespace liqo-bench-offload
//!   created:  N Services, N EndpointSlices (2 endpoints each), N ConfigMaps, N Secrets in the
//!             offloaded namespace, 32 requests in flight: seconds until rome holds them all,
//!             and until milan holds all their copies (the ratio of the two); the provider's
//!             API writes per object (its apiserver_request_total); the virtual kubelet's RSS
//!             before and after
//!   kill -9:  half the ConfigMaps and EndpointSlices deleted at home while the virtual kubelet
//!             is killed (its controller-manager starts it again): seconds until milan's copies
//!             are, by kind and name, exactly rome's objects again (none missing, none left
//!             over); then rome's IPAM (given to the virtual kubelets alone, milan's view told
//!             by hand: no gateways run here) holds for milan exactly the external addresses
//!             rome's remaining slices list (`liqo-ipam list`: none leaked, none missing).
//! ```
//!
//! It owns only the measuring: clusters, Liqo, peering and offloading are the offload bench's
//! bed ([`crate::offload`]). The clusters are named `<prefix>rb`; they are stopped at the end,
//! on failure and on Ctrl-C.

pub mod ipam;
pub mod report;
pub mod workload;

use std::time::{Duration, Instant};

pub use report::{ReflectionReport, render};

use crate::{
    BenchError,
    offload::{OFFLOADED, bed::with_liqo},
    report_core::{Header, liqo_tools},
    run,
};
use e2e::k8s::{self, Clusters, Named};

/// Objects per kind by default.
pub const DEFAULT_OBJECTS: u32 = 1000;

/// What `liqo-bench reflection` runs.
#[derive(Debug, Clone)]
pub struct ReflectionOptions {
    /// The run's prefix (the clusters get `<prefix>rb`).
    pub prefix: e2e::lab::Prefix,
    /// Objects per kind.
    pub objects: u32,
    /// How long each wait may take.
    pub timeout_secs: u64,
}

/// Runs `liqo-bench reflection`. Progress goes to stderr.
pub async fn reflection(opts: ReflectionOptions) -> Result<ReflectionReport, BenchError> {
    if opts.objects == 0 {
        return Err(BenchError::Options("--objects must be at least 1".into()));
    }
    let prefix = run::cluster_prefix(&opts.prefix, "rb")?;
    run::on_own_clusters(&prefix, bench(opts, prefix.clone(), Header::now())).await
}

async fn bench(
    opts: ReflectionOptions,
    prefix: e2e::lab::Prefix,
    mut header: Header,
) -> Result<ReflectionReport, BenchError> {
    let timeout = Duration::from_secs(opts.timeout_secs);
    let bins = k8s::binaries().map_err(|e| BenchError::step("the Kubernetes binaries", &e))?;
    let named = |i: u8, name: &str| Named {
        name: name.into(),
        pod_cidr: ipnet::Ipv4Net::new([10, 244 + i, 0, 0].into(), 16).expect("a /16"),
        service_cidr: ipnet::Ipv4Net::new([10, 96 + i, 0, 0].into(), 16).expect("a /16"),
        nodes: 1,
        advertise: None,
        egress: None,
        public: Vec::new(),
        audit: false,
    };
    eprintln!("bench: starting clusters {prefix}");
    let set = Clusters::up_named(&bins, &prefix, &[named(0, "rome"), named(1, "milan")])
        .await
        .map_err(|e| BenchError::step("starting the clusters", &e))?;
    let rome = client(&set, "rome").await?;
    let milan = client(&set, "milan").await?;
    let (liqo, _) = with_liqo(&set, &bins, &rome, 1, None, true, timeout).await?;
    let home_ipam = ipam::tell_views(&liqo.installed, named(1, "milan").pod_cidr).await?;
    header.tools = liqo_tools(
        &liqo.installed,
        &["liqo-controller-manager", "liqo-virtual-kubelet"],
    );
    let vk = || {
        liqo.procs
            .virtual_kubelet()
            .ok_or_else(|| BenchError::Options("rome's virtual kubelet is not running".into()))
    };
    let rss_before = workload::rss_mib(vk()?)?;
    let writes_before = workload::mutations(&milan).await?;
    let n = opts.objects;
    eprintln!("bench: creating {n} Services, EndpointSlices, ConfigMaps and Secrets");
    let t0 = Instant::now();
    workload::create_all(&rome, OFFLOADED, n).await?;
    let home_secs = t0.elapsed().as_secs_f64();
    let want = workload::Counts::all(u64::from(n));
    workload::until_copies(&milan, &liqo.remote_ns, &want, timeout).await?;
    let remote_secs = t0.elapsed().as_secs_f64();
    let writes = workload::mutations(&milan)
        .await?
        .saturating_sub(writes_before);
    let rss_after = workload::rss_mib(vk()?)?;
    eprintln!(
        "bench: all copies on milan after {remote_secs:.1} s (rome held them after {home_secs:.1} s)"
    );

    let pid = vk()?;
    let t1 = Instant::now();
    let left = workload::delete_half_killing(&rome, OFFLOADED, n, pid).await?;
    workload::until_same(&rome, OFFLOADED, &milan, &liqo.remote_ns, timeout).await?;
    let converged_secs = t1.elapsed().as_secs_f64();
    let restarted = vk()? != pid;
    if !restarted {
        return Err(BenchError::Options(format!(
            "the virtual kubelet {pid} was not replaced after its kill"
        )));
    }
    let held = workload::copies(&milan, &liqo.remote_ns).await?;
    if held != left {
        return Err(BenchError::Options(format!(
            "after the kill the provider holds {held:?}, want {left:?}"
        )));
    }
    eprintln!("bench: converged {converged_secs:.1} s after the kill (restarted: {restarted})");
    let deadline = Instant::now() + timeout;
    let holds = loop {
        let h = home_ipam.holds(&rome, OFFLOADED).await?;
        if h.leaked.is_empty() && h.missing.is_empty() && h.held > 0 {
            break h;
        }
        if Instant::now() > deadline {
            return Err(BenchError::Options(format!(
                "after the kill rome's IPAM holds for milan {} external mappings: leaked {:?}, \
                 missing {:?}",
                h.held, h.leaked, h.missing
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!(
        "bench: rome's IPAM holds {} external mappings for milan, as many as the slices list",
        holds.held
    );
    Ok(ReflectionReport {
        header,
        objects_per_kind: n,
        home_secs,
        remote_secs,
        ratio: remote_secs / home_secs.max(f64::EPSILON),
        provider_writes_per_object: writes as f64 / f64::from(4 * n),
        vk_rss_mib_before: rss_before,
        vk_rss_mib_after: rss_after,
        kill_converged_secs: converged_secs,
        kill_restarted: restarted,
        after_kill: left,
        ipam_after_kill: holds,
    })
}

async fn client(set: &Clusters, name: &str) -> Result<kube::Client, BenchError> {
    set.get(name)
        .ok_or_else(|| BenchError::Options(format!("no cluster {name}")))?
        .client()
        .await
        .map_err(|e| BenchError::step(format!("a client of {name}"), &e))
}

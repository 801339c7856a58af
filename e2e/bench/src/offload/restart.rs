//! The virtual kubelet killed (SIGKILL) while every offloaded pod runs, its controller-manager
//! starting it again: seconds until the new process runs, until it renewed its node's Lease,
//! and until it went quiet (no request for [`QUIET`] but its Lease and node status); what it
//! asked of each API server meanwhile (the audit logs), and the writes to pods and ShadowPods
//! among them, which must be none: nothing changed. Then every home pod must still be Running,
//! with exactly one ShadowPod and one pod on the provider each.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Pod},
    jiff::Timestamp,
};
use kube::{Api, Client, api::ListParams};
use serde::{Deserialize, Serialize};

use super::{
    requests::{ClientRequests, Mark},
    setup::Procs,
    workload::count,
};
use crate::BenchError;
use control::api::virtualkubelet::ShadowPod;

/// How long the virtual kubelet must ask nothing (but its Lease and node) to be converged.
pub const QUIET: Duration = Duration::from_secs(5);
/// The virtual kubelet's program in the audit logs (its `User-Agent`).
const VK_CLIENT: &str = "liqo-virtual-kubelet";
/// The virtual node.
const NODE: &str = "liqo-milan";

/// What the restart showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VkRestart {
    /// Offloaded pods Running when it was killed.
    pub pods: u32,
    /// From the kill until the new process ran.
    pub secs_to_process: f64,
    /// From the kill until the node's Lease was renewed by the new process.
    pub secs_to_lease: f64,
    /// From the kill until its last request (but Lease and node) before [`QUIET`].
    pub secs_to_quiet: f64,
    /// Its writes to pods, pod statuses and ShadowPods since the kill (none expected).
    pub pod_writes: u64,
    /// Its requests since the kill, per API server, per pod.
    pub requests: Vec<ClientRequests>,
    /// After it: home pods Running, ShadowPods and provider pods.
    pub home_running: usize,
    /// ShadowPods on the provider.
    pub shadow_pods: usize,
    /// Pods on the provider.
    pub remote_pods: usize,
}

/// Where the restart looks.
pub(crate) struct Inputs<'a> {
    pub(crate) rome: &'a Client,
    pub(crate) ns: &'a str,
    pub(crate) milan: &'a Client,
    pub(crate) remote_ns: &'a str,
    pub(crate) procs: &'a Procs,
    pub(crate) audit: &'a [(String, PathBuf)],
    pub(crate) pods: u32,
    pub(crate) timeout: Duration,
}

/// Kills the virtual kubelet and measures (see the module doc).
pub(crate) async fn measure(i: &Inputs<'_>) -> Result<VkRestart, BenchError> {
    let fail = |what: &str, e: &(dyn std::error::Error + 'static)| BenchError::step(what, e);
    let late =
        |what: &str| crate::options::fail(what, format!("not within {} s", i.timeout.as_secs()));
    let old = i
        .procs
        .virtual_kubelet()
        .ok_or_else(|| BenchError::Options("no virtual kubelet process to kill".into()))?;
    let before = Mark::now(i.audit).await?;
    let killed_at = Timestamp::now();
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|e| fail(&format!("killing the virtual kubelet (pid {old})"), &e))?;
    let deadline = t0 + i.timeout;
    let secs_to_process = loop {
        if i.procs.virtual_kubelet().is_some_and(|p| p != old) {
            break t0.elapsed().as_secs_f64();
        }
        if Instant::now() > deadline {
            return Err(late("the virtual kubelet started again"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let leases: Api<Lease> = Api::namespaced(i.rome.clone(), "kube-node-lease");
    let secs_to_lease = loop {
        let renewed = leases
            .get_opt(NODE)
            .await
            .map_err(|e| fail("reading the node's Lease", &e))?
            .and_then(|l| l.spec?.renew_time)
            .is_some_and(|t| t.0 > killed_at);
        if renewed {
            break t0.elapsed().as_secs_f64();
        }
        if Instant::now() > deadline {
            return Err(late("the node's Lease renewed"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Quiet: its requests (but Lease and node) stop growing for QUIET.
    let (mut last, mut changed) = (u64::MAX, Instant::now());
    let secs_to_quiet = loop {
        let now = Mark::now(i.audit).await?;
        let n = busy(&before.until(&now)?);
        if n != last {
            (last, changed) = (n, Instant::now());
        } else if changed.elapsed() >= QUIET {
            break (changed - t0).as_secs_f64();
        }
        if Instant::now() > deadline {
            return Err(late("the virtual kubelet quiet"));
        }
    };
    let counts = before.until(&Mark::now(i.audit).await?)?;
    let pod_writes = counts
        .0
        .iter()
        .filter(|(k, _)| k.client == VK_CLIENT && k.is_write())
        .filter(|(k, _)| {
            matches!(
                k.resource.as_str(),
                "pods" | "pods/status" | "shadowpods" | "shadowpods/status"
            )
        })
        .map(|(_, n)| *n)
        .sum();
    let requests = counts
        .per_client(i.pods)
        .into_iter()
        .filter(|c| c.client == VK_CLIENT)
        .collect();
    let home: Vec<Pod> = Api::<Pod>::namespaced(i.rome.clone(), i.ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| fail("listing the home pods", &e))?
        .items;
    let home_running = home
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    let shadow_pods = count(
        &Api::<ShadowPod>::namespaced(i.milan.clone(), i.remote_ns),
        None,
    )
    .await?;
    let remote_pods = count(&Api::<Pod>::namespaced(i.milan.clone(), i.remote_ns), None).await?;
    Ok(VkRestart {
        pods: i.pods,
        secs_to_process,
        secs_to_lease,
        secs_to_quiet,
        pod_writes,
        requests,
        home_running,
        shadow_pods,
        remote_pods,
    })
}

/// The virtual kubelet's requests but its Lease, its node and its watches.
fn busy(c: &super::requests::Counts) -> u64 {
    c.0.iter()
        .filter(|(k, _)| k.client == VK_CLIENT && k.verb != "watch")
        .filter(|(k, _)| !matches!(k.resource.as_str(), "leases" | "nodes" | "nodes/status"))
        .map(|(_, n)| *n)
        .sum()
}

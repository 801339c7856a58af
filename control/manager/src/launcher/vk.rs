//! [`VkLauncher`]: runs the virtual kubelet of each accepted offer, as a task of this process
//! ([`Mode::InProcess`], the controller-manager's identity) or as a child process
//! `liqo-virtual-kubelet` ([`Mode::Process`], with its own kubeconfig: the chart's
//! `liqo-virtual-kubelet-local` role). Each runs under a supervisor task that restarts it
//! after a failure or an exit (backoff 1 s doubling to 30 s, reset after a minute up), so a
//! killed virtual kubelet comes back and adopts what exists.
//!
//! `stop` drains the node while the virtual kubelet still runs (so the remote pods go and
//! the local ones are finalized), then stops it, then deletes the node (pods left over are
//! force-deleted). It never decides when a peer has a virtual kubelet (the ResourceOffer
//! controller does).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use control::api::{ClusterId, discovery::ClusterIdentity};
use futures::future::BoxFuture;
use kube::Client;
use liqo_virtual_kubelet::{VkConfig, config as vkc, node};
use tokio::task::JoinHandle;

use super::{LaunchError, Launcher, Peer};
use liqo_types::chain;

use crate::identity::Peers;

/// How long `stop` waits for the node's pods to be evicted before deleting the node.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The first restart delay after a virtual kubelet fails; doubled up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest restart delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run longer than this resets the backoff.
pub const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// A running virtual kubelet: its supervisor, the provider it stands for, and the pid of its
/// current child (process mode).
struct Running {
    foreign: ClusterIdentity,
    supervisor: JoinHandle<()>,
    child: ChildPid,
}

/// Runs virtual kubelets.
pub struct VkLauncher {
    client: Client,
    home: ClusterIdentity,
    settings: Settings,
    peers: Arc<Peers>,
    running: Mutex<HashMap<ClusterId, Running>>,
}

impl VkLauncher {
    /// A launcher for the home cluster `home`, writing to `client`.
    pub fn new(client: Client, home: ClusterIdentity, settings: Settings) -> Self {
        VkLauncher {
            client,
            home,
            settings,
            peers: Arc::new(Peers::default()),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<ClusterId, Running>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn start_vk(&self, peer: &Peer) -> Result<(), LaunchError> {
        if let Some(r) = self.running().get(&peer.cluster_id)
            && !r.supervisor.is_finished()
        {
            return Ok(());
        }
        let fail = fail(peer);
        let fc = crate::kit::find_foreign_cluster(&self.client, &peer.cluster_id)
            .await
            .map_err(|e| fail(format!("list ForeignClusters: {e}")))?
            .map(|f| f.spec.cluster_identity)
            .ok_or_else(|| fail("no ForeignCluster names this peer".into()))?;
        // Checked now (a clear launch error), then again at every (re)start.
        self.peers
            .client(&self.client, &peer.namespace, &peer.cluster_id)
            .await
            .map_err(|e| fail(format!("the identity at the peer: {e}")))?
            .ok_or_else(|| fail("no signed identity at the peer yet".into()))?;
        let job = Job {
            client: self.client.clone(),
            home: self.home.clone(),
            foreign: fc.clone(),
            peer: peer.clone(),
            settings: self.settings.clone(),
            peers: self.peers.clone(),
            child: ChildPid::default(),
            last_port: Default::default(),
        };
        let child = job.child.clone();
        let supervisor = tokio::spawn(supervise(job));
        let old = self.running().insert(
            peer.cluster_id.clone(),
            Running {
                foreign: fc,
                supervisor,
                child,
            },
        );
        if let Some(old) = old {
            ended(old).await;
        }
        Ok(())
    }

    async fn stop_vk(&self, peer: &Peer) -> Result<(), LaunchError> {
        let fail = fail(peer);
        let known = self
            .running()
            .get(&peer.cluster_id)
            .map(|r| r.foreign.clone());
        let foreign = match known {
            Some(f) => Some(f),
            None => crate::kit::find_foreign_cluster(&self.client, &peer.cluster_id)
                .await
                .map_err(|e| fail(format!("list ForeignClusters: {e}")))?
                .map(|f| f.spec.cluster_identity),
        };
        let Some(foreign) = foreign else {
            // No ForeignCluster and nothing running: the nodes (if any) are found by their
            // label, the provider's name by the node's.
            for foreign in orphan_nodes(&self.client, &peer.cluster_id)
                .await
                .map_err(|e| fail(format!("list virtual nodes: {e}")))?
            {
                node::delete(&self.client, &foreign)
                    .await
                    .map_err(|e| fail(format!("delete the virtual node: {}", chain(&e))))?;
            }
            return Ok(());
        };
        let name = control::names::virtual_node(&foreign.cluster_name).to_string();
        if self.running().contains_key(&peer.cluster_id) {
            // Never cordon or evict on a node that is not this peer's virtual node.
            let existing = kube::Api::<k8s_openapi::api::core::v1::Node>::all(self.client.clone())
                .get_opt(&name)
                .await
                .map_err(|e| fail(format!("get Node {name}: {e}")))?;
            node::claim(existing.as_ref(), peer.cluster_id.as_str())
                .map_err(|e| fail(e.to_string()))?;
            let left = node::drain(&self.client, &name, DRAIN_TIMEOUT)
                .await
                .map_err(|e| fail(format!("drain {name}: {}", chain(&e))))?;
            if left > 0 {
                tracing::warn!(node = %name, pods = left, "pods still on the virtual node after the drain: force-deleted");
            }
        }
        let running = self.running().remove(&peer.cluster_id);
        if let Some(r) = running {
            // Gone before the node is deleted: else it would apply the node again.
            ended(r).await;
        }
        // The provider kubeconfig (our private key at the peer) is not left behind.
        if let Mode::Process { state_dir, .. } = &self.settings.mode {
            let dir = state_dir.join(peer.cluster_id.as_str());
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(fail(format!("removing {}: {e}", dir.display()))),
            }
        }
        node::delete(&self.client, &foreign)
            .await
            .map_err(|e| fail(format!("delete {name}: {}", chain(&e))))
    }
}

/// Stops a supervisor and waits until its virtual kubelet is gone: the task dropped, or the
/// child (killed when its handle is dropped) exited (up to 10 s).
async fn ended(r: Running) {
    r.supervisor.abort();
    // Cancelled is the expected outcome; a panic there was logged by the runtime.
    if let Err(e) = r.supervisor.await
        && !e.is_cancelled()
    {
        tracing::warn!(error = %e, "the virtual kubelet's supervisor panicked");
    }
    let pid = *r.child.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(pid) = pid {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while alive(pid) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if alive(pid) {
            tracing::warn!(
                pid,
                "the virtual kubelet did not exit within 10 s of SIGKILL"
            );
        }
    }
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

fn fail(peer: &Peer) -> impl Fn(String) -> LaunchError + '_ {
    move |message| LaunchError {
        peer: peer.cluster_id.clone(),
        message,
    }
}

/// The providers of the virtual nodes labelled for `peer`, named after the nodes (those whose
/// name is not `liqo-<cluster name>` are skipped: not ours to delete).
async fn orphan_nodes(
    client: &Client,
    peer: &ClusterId,
) -> Result<Vec<ClusterIdentity>, kube::Error> {
    use control::consts::{labels, objects, values};
    use kube::{Api, ResourceExt, api::ListParams};
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let selector = format!(
        "{}={},{}={}",
        labels::NODE_TYPE,
        values::VIRTUAL_NODE,
        labels::REMOTE_CLUSTER_ID,
        peer.as_str()
    );
    let nodes = api.list(&ListParams::default().labels(&selector)).await?;
    Ok(nodes
        .items
        .iter()
        .filter_map(|n| {
            let name = n.name_any();
            let cluster = name
                .strip_prefix(objects::VIRTUAL_NODE_PREFIX)?
                .parse()
                .ok()?;
            Some(ClusterIdentity {
                cluster_id: peer.clone(),
                cluster_name: cluster,
            })
        })
        .collect())
}

/// Runs the peer's virtual kubelet again and again until aborted.
async fn supervise(job: Job) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = std::time::Instant::now();
        let outcome = match &job.settings.mode {
            Mode::InProcess => run_task(&job).await,
            Mode::Process {
                binary,
                kubeconfig,
                state_dir,
            } => run_child(&job, binary, kubeconfig.as_deref(), state_dir).await,
        };
        if started.elapsed() >= HEALTHY_RUN {
            backoff = FIRST_BACKOFF;
        }
        tracing::warn!(
            peer = %job.peer.cluster_id,
            why = %outcome,
            retry = ?backoff,
            "the virtual kubelet stopped: restarting it"
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn run_task(job: &Job) -> String {
    let remote = match job
        .peers
        .client(&job.client, &job.peer.namespace, &job.peer.cluster_id)
        .await
    {
        Ok(Some(r)) => r,
        Ok(None) => return "no signed identity at the peer".into(),
        Err(e) => return format!("the identity at the peer: {}", chain(&e)),
    };
    let port = match job.port().await {
        Ok(p) => p,
        Err(e) => return chain(&e),
    };
    let cfg = VkConfig {
        local: job.client.clone(),
        remote,
        home: job.home.clone(),
        foreign: job.foreign.clone(),
        tenant_namespace: job.peer.namespace.clone(),
        offer: job.peer.offer.clone(),
        node_ip: job.settings.node_ip,
        listen: (job.settings.node_ip, port).into(),
        client_ca: job.settings.client_ca.clone(),
        ipam: job.settings.ipam.clone(),
        liqo_network: job.settings.liqo_network,
        pod_workers: job.settings.pod_workers,
        lease_duration: vkc::DEFAULT_LEASE_DURATION,
        ping_interval: vkc::DEFAULT_PING_INTERVAL,
        ping_timeout: vkc::DEFAULT_PING_TIMEOUT,
        extra_labels: Default::default(),
        apiserver_support: job.settings.apiserver_support,
        home_api: job.settings.home_api.clone(),
        reflection: job.settings.reflection,
    };
    match liqo_virtual_kubelet::run(cfg, futures::future::pending()).await {
        Ok(()) => "it returned".into(),
        Err(e) => chain(&e),
    }
}

impl Launcher for VkLauncher {
    fn start<'a>(&'a self, peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(self.start_vk(peer))
    }

    fn stop<'a>(&'a self, peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(self.stop_vk(peer))
    }
}

impl Drop for VkLauncher {
    fn drop(&mut self) {
        for r in self.running().values() {
            r.supervisor.abort();
        }
    }
}

mod child;
mod job;
#[cfg(test)]
mod tests;

pub use child::child_args;
use child::run_child;
use job::{ChildPid, Job};
pub use job::{Mode, Settings};

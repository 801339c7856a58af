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
    net::IpAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use control::api::{ClusterId, discovery::ClusterIdentity};
use futures::future::BoxFuture;
use kube::Client;
use liqo_virtual_kubelet::{VkConfig, config as vkc, node};
use tokio::task::JoinHandle;

use super::{LaunchError, Launcher, Peer};
use crate::identity::{self, Peers};

/// How long `stop` waits for the node's pods to be evicted before deleting the node.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The first restart delay after a virtual kubelet fails; doubled up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest restart delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run longer than this resets the backoff.
pub const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// How the virtual kubelets run.
#[derive(Debug, Clone)]
pub enum Mode {
    /// A task of this process.
    InProcess,
    /// A child process.
    Process {
        /// The `liqo-virtual-kubelet` binary.
        binary: PathBuf,
        /// Its kubeconfig of the home API server (else it inherits ours).
        kubeconfig: Option<PathBuf>,
        /// Where the provider kubeconfigs given to the children are written (0600).
        state_dir: PathBuf,
    },
}

/// What every virtual kubelet is started with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Task or process.
    pub mode: Mode,
    /// The nodes' InternalIP (where the home API server reaches the kubelet API).
    pub node_ip: IpAddr,
    /// The kubelet API's port; 0 picks a free one per virtual kubelet (several on one host).
    pub port: u16,
    /// The CA of the client certificates the kubelet API accepts.
    pub client_ca: Option<PathBuf>,
    /// The home IPAM (pod IPs remapped; the network's state on the node).
    pub ipam: Option<ipam::service::client::ClientOptions>,
    /// Pod reflection workers.
    pub pod_workers: usize,
}

/// A running virtual kubelet: its supervisor and the provider it stands for.
struct Running {
    foreign: ClusterIdentity,
    supervisor: JoinHandle<()>,
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
        let fc = foreign_cluster(&self.client, &peer.cluster_id)
            .await
            .map_err(|e| fail(format!("list ForeignClusters: {e}")))?
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
        };
        let supervisor = tokio::spawn(supervise(job));
        let old = self.running().insert(
            peer.cluster_id.clone(),
            Running {
                foreign: fc,
                supervisor,
            },
        );
        if let Some(old) = old {
            old.supervisor.abort();
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
            None => foreign_cluster(&self.client, &peer.cluster_id)
                .await
                .map_err(|e| fail(format!("list ForeignClusters: {e}")))?,
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
            let left = node::drain(&self.client, &name, DRAIN_TIMEOUT)
                .await
                .map_err(|e| fail(format!("drain {name}: {}", chain(&e))))?;
            if left > 0 {
                tracing::warn!(node = %name, pods = left, "pods still on the virtual node after the drain: force-deleted");
            }
        }
        if let Some(r) = self.running().remove(&peer.cluster_id) {
            // Aborting the supervisor drops the task or the child (killed on drop).
            r.supervisor.abort();
        }
        node::delete(&self.client, &foreign)
            .await
            .map_err(|e| fail(format!("delete {name}: {}", chain(&e))))
    }
}

fn fail(peer: &Peer) -> impl Fn(String) -> LaunchError + '_ {
    move |message| LaunchError {
        peer: peer.cluster_id.clone(),
        message,
    }
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    crate::run::error_chain(e)
}

/// The provider's identity from its ForeignCluster (the oldest naming it).
async fn foreign_cluster(
    client: &Client,
    id: &ClusterId,
) -> Result<Option<ClusterIdentity>, kube::Error> {
    use kube::{Api, ResourceExt, api::ListParams};
    let api: Api<control::api::discovery::ForeignCluster> = Api::all(client.clone());
    let all = api.list(&ListParams::default()).await?;
    Ok(all
        .items
        .into_iter()
        .filter(|f| f.spec.cluster_identity.cluster_id == *id)
        .min_by_key(|f| (f.creation_timestamp().map(|t| t.0), f.name_any()))
        .map(|f| f.spec.cluster_identity))
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

/// Everything one supervisor needs.
struct Job {
    client: Client,
    home: ClusterIdentity,
    foreign: ClusterIdentity,
    peer: Peer,
    settings: Settings,
    peers: Arc<Peers>,
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

/// A free loopback-or-any port for a kubelet API, or the configured one.
fn port(settings: &Settings) -> Result<u16, String> {
    if settings.port != 0 {
        return Ok(settings.port);
    }
    std::net::TcpListener::bind((settings.node_ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("a free port on {}: {e}", settings.node_ip))
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
    let port = match port(&job.settings) {
        Ok(p) => p,
        Err(e) => return e,
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
        pod_workers: job.settings.pod_workers,
        lease_duration: vkc::DEFAULT_LEASE_DURATION,
        ping_interval: vkc::DEFAULT_PING_INTERVAL,
        ping_timeout: vkc::DEFAULT_PING_TIMEOUT,
        extra_labels: Default::default(),
    };
    match liqo_virtual_kubelet::run(cfg, futures::future::pending()).await {
        Ok(()) => "it returned".into(),
        Err(e) => chain(&e),
    }
}

async fn run_child(
    job: &Job,
    binary: &std::path::Path,
    kubeconfig: Option<&std::path::Path>,
    state_dir: &std::path::Path,
) -> String {
    let secret = match identity::find(&job.client, &job.peer.namespace, &job.peer.cluster_id).await
    {
        Ok(Some(s)) => s,
        Ok(None) => return "no identity Secret for the peer".into(),
        Err(e) => return format!("the identity Secret: {}", chain(&e)),
    };
    let foreign_kubeconfig = match identity::kubeconfig(&secret) {
        Ok(k) => k,
        Err(e) => return format!("the identity Secret: {}", chain(&e)),
    };
    let dir = state_dir.join(job.peer.cluster_id.as_str());
    let file = dir.join("foreign.kubeconfig");
    if let Err(e) = write_private(&dir, &file, &foreign_kubeconfig) {
        return e;
    }
    let port = match port(&job.settings) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let args = child_args(
        &job.home,
        &job.foreign,
        &job.peer,
        &job.settings,
        &file,
        port,
    );
    let mut cmd = tokio::process::Command::new(binary);
    // The child dies with us (it reads our pid and asks the kernel), and when dropped.
    cmd.args(&args)
        .env("LIQO_VK_PARENT_PID", std::process::id().to_string())
        .kill_on_drop(true);
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return format!("spawning {}: {e}", binary.display()),
    };
    tracing::info!(peer = %job.peer.cluster_id, pid = ?child.id(), port, "virtual kubelet started");
    match child.wait().await {
        Ok(status) => format!("it exited ({status})"),
        Err(e) => format!("waiting for it: {e}"),
    }
}

/// The child's command line.
pub fn child_args(
    home: &ClusterIdentity,
    foreign: &ClusterIdentity,
    peer: &Peer,
    s: &Settings,
    foreign_kubeconfig: &std::path::Path,
    port: u16,
) -> Vec<String> {
    let mut a: Vec<String> = [
        ("--foreign-cluster-id", foreign.cluster_id.to_string()),
        ("--foreign-cluster-name", foreign.cluster_name.to_string()),
        ("--home-cluster-id", home.cluster_id.to_string()),
        ("--home-cluster-name", home.cluster_name.to_string()),
        ("--tenant-namespace", peer.namespace.clone()),
        ("--resource-offer", peer.offer.clone()),
        (
            "--foreign-kubeconfig",
            foreign_kubeconfig.display().to_string(),
        ),
        ("--node-ip", s.node_ip.to_string()),
        ("--listen-port", port.to_string()),
        ("--pod-reflection-workers", s.pod_workers.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_owned(), v])
    .collect();
    if let Some(ca) = &s.client_ca {
        a.extend(["--client-ca-file".into(), ca.display().to_string()]);
    }
    if let Some(ipam) = &s.ipam {
        a.extend(["--ipam-server".into(), ipam.server.clone()]);
        if let Some(f) = &ipam.ca_file {
            a.extend(["--ipam-ca-file".into(), f.display().to_string()]);
        }
        if let Some(f) = &ipam.token_file {
            a.extend(["--ipam-token-file".into(), f.display().to_string()]);
        }
    }
    a
}

/// Writes `value` as JSON (which every kubeconfig reader takes) to `file`, mode 0600, in
/// `dir` (made 0700).
fn write_private(
    dir: &std::path::Path,
    file: &std::path::Path,
    value: &impl serde::Serialize,
) -> Result<(), String> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let text = serde_json::to_vec(value).map_err(|e| format!("the kubeconfig: {e}"))?;
    let tmp = file.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    f.write_all(&text)
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("writing {}: {e}", file.display()))
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

#[cfg(test)]
mod tests;

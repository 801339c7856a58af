//! What a virtual kubelet is started with ([`Settings`], [`Mode`]) and what one supervisor
//! holds ([`Job`]), shared by the in-process and the child-process runs.

use std::{
    net::IpAddr,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, Ordering},
    },
};

use control::api::discovery::ClusterIdentity;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};

use crate::identity::Peers;
use crate::launcher::Peer;

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
    /// The home IPAM (pod IPs remapped, the reflected EndpointSlices' addresses).
    pub ipam: Option<ipam::service::client::ClientOptions>,
    /// Whether the network is Liqo's (the network manager runs): the TunnelEndpoint gates
    /// the virtual node's readiness.
    pub liqo_network: bool,
    /// Pod reflection workers.
    pub pod_workers: usize,
    /// A process's worker threads (`None`: its default).
    pub worker_threads: Option<std::num::NonZeroUsize>,
    /// API server support as asked for: offloaded pods get tokens of their home
    /// ServiceAccounts (a home API server given implies it: `VkConfig::api_support`).
    pub apiserver_support: bool,
    /// Where the provider's pods reach the home API server, if given (else found).
    pub home_api: Option<control::shadowpod::token::HomeApi>,
    /// Resource reflection workers per kind.
    pub reflection: liqo_virtual_kubelet::config::ReflectionWorkers,
}

/// The pid of a supervisor's current child, if one runs.
pub(super) type ChildPid = Arc<Mutex<Option<u32>>>;

/// Everything one supervisor needs.
pub(super) struct Job {
    pub(super) client: Client,
    pub(super) home: ClusterIdentity,
    pub(super) foreign: ClusterIdentity,
    pub(super) peer: Peer,
    pub(super) settings: Settings,
    pub(super) peers: Arc<Peers>,
    pub(super) child: ChildPid,
    /// The kubelet API's port of the last run (0 before the first).
    pub(super) last_port: AtomicU16,
}

impl Job {
    /// The kubelet API's port of this (re)start ([`port`]), preferring the last run's, else
    /// the one the peer's Node advertises (a restarted controller-manager).
    pub(super) async fn port(&self) -> Result<u16, NoPort> {
        let before = match self.last_port.load(Ordering::Relaxed) {
            0 => self.advertised().await,
            p => Some(p),
        };
        let p = port(&self.settings, before)?;
        self.last_port.store(p, Ordering::Relaxed);
        Ok(p)
    }

    /// The kubelet port the peer's virtual Node advertises, if it exists and says one.
    async fn advertised(&self) -> Option<u16> {
        let name = control::names::virtual_node(&self.foreign.cluster_name);
        match Api::<Node>::all(self.client.clone())
            .get_opt(name.as_str())
            .await
        {
            Ok(node) => node.as_ref().and_then(control::virtual_node::kubelet_port),
            Err(e) => {
                // Only a preference: any free port serves.
                tracing::warn!(node = %name, error = %e, "reading the virtual node's kubelet port: a free one is taken");
                None
            }
        }
    }
}

/// The kubelet API's port: the configured one; else `before` (the port this peer's virtual
/// kubelet had) while it is still free on the node IP: the home API server dials the Node's
/// advertised port, so a restarted virtual kubelet serves logs and exec at once instead of
/// after its first status write; else any free one.
pub(super) fn port(settings: &Settings, before: Option<u16>) -> Result<u16, NoPort> {
    if settings.port != 0 {
        return Ok(settings.port);
    }
    let bind = |p: u16| {
        std::net::TcpListener::bind((settings.node_ip, p))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
    };
    if let Some(p) = before.filter(|p| *p != 0) {
        match bind(p) {
            Ok(_) => return Ok(p),
            // Logs and exec reach the new port only after the node's next status write.
            Err(e) => tracing::warn!(
                port = p,
                error = %e,
                "the virtual kubelet's port is taken: it moves to a free one"
            ),
        }
    }
    bind(0).map_err(|source| NoPort {
        ip: settings.node_ip,
        source,
    })
}

/// No free port for a kubelet API.
#[derive(Debug, thiserror::Error)]
#[error("a free port on {ip}")]
pub(super) struct NoPort {
    /// Where one was looked for.
    ip: IpAddr,
    /// The cause.
    #[source]
    source: std::io::Error,
}

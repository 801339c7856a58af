//! Pod reflection (§2.3, §2.6 of the control-plane spec), and with it resource reflection
//! ([`crate::resources`], following the same NamespaceMaps): the pods scheduled on the virtual
//! node become ShadowPods in the remote namespaces our NamespaceMaps map (the provider's
//! ShadowPod controller runs them); their status comes back (IPs through the home IPAM,
//! restarts carried over); pods in namespaces not offloaded here are rejected.
//!
//! * [`watch`]: one watch of the local pods on the node (field selector), one of our
//!   NamespaceMaps, and per mapped namespace two remote watches (ShadowPods, Pods, with the
//!   reflection labels; RBAC on the provider is per namespace: never cluster-wide), started
//!   and stopped as the mapping changes; each into a reflector store, every event queuing the
//!   local `namespace/name`.
//! * [`queue`]: the keyed dedup queue; `cfg.pod_workers` workers run [`worker`]: read the
//!   stores, `control::shadowpod::reflection` (pure), map the IPs ([`ips`]) when a status is to be written, perform
//!   the actions ([`deletions`]: with UID preconditions); a ShadowPod whose pod does not come
//!   has its remote name looked up once (a Pod there that is not ours: a Warning Event). What
//!   a worker created or deleted and the watch does not show yet stands in for the store's
//!   view ([`created`]), as its writes to a home pod do (`control::shadowpod::pending`).
//!
//! * [`tokens`]: with API server support, each offloaded pod's ServiceAccount token written
//!   beside its ShadowPod and renewed (what was written: [`issued`]; a deleted token Secret
//!   written again: [`token_watch`]).
//! * [`events`]: the provider's Events about our remote pods mirrored onto the home pods
//!   (rate-limited per pod).
//!
//! It never polls a pod (one read of a remote name per ShadowPod at most), never writes a remote object without the reflection labels (a
//! Warning Event on the local pod says so), never watches the provider cluster-wide, and
//! never creates the remote Pod itself (the provider's ShadowPod controller does).

pub mod created;
pub mod deletions;
pub mod events;
pub mod ips;
pub mod issued;
pub mod key;
pub mod mapped;
pub mod probe;
pub mod queue;
pub mod shared;
mod status_write;
pub mod token_watch;
pub mod tokens;
pub mod watch;
pub mod worker;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock},
};

use kube::runtime::events::Recorder;
use tokio::task::JoinSet;

use crate::VkConfig;

pub use key::Key;
pub use shared::Shared;

/// Why pod reflection failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectionError {
    /// The IPAM options are unusable.
    #[error("the IPAM client")]
    Ipam(#[source] ipam::service::client::ClientError),
    /// Resource reflection could not start.
    #[error("resource reflection")]
    Resources(#[source] crate::resources::ResourcesError),
    /// One of its loops ended.
    #[error("pod reflection's {0} ended")]
    Ended(&'static str),
    /// One of its loops panicked or was cancelled.
    #[error("pod reflection task")]
    Task(#[source] tokio::task::JoinError),
}

/// Reflects the pods on the virtual node until dropped (every task it starts ends with it).
pub async fn run(cfg: Arc<VkConfig>) -> Result<(), ReflectionError> {
    let ips = ips::Mapper::new(&cfg).map_err(ReflectionError::Ipam)?;
    let reflectors =
        Arc::new(crate::resources::Reflectors::new(&cfg).map_err(ReflectionError::Resources)?);
    let queue = Arc::new(queue::Queue::default());
    let (local_store, local_writer) = kube::runtime::reflector::store();
    let recorder = Recorder::new(cfg.local.clone(), events::reporter(&cfg));
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        queue: queue.clone(),
        local: local_store,
        namespaces: RwLock::new(HashMap::new()),
        restarts: Mutex::new(HashMap::new()),
        ips,
        failures: Mutex::new(HashMap::new()),
        recorder,
        probed: Mutex::new(HashMap::new()),
        tokens: Arc::new(issued::Tokens::default()),
        home_api: std::sync::OnceLock::new(),
        created: Default::default(),
        pending: Mutex::new(HashMap::new()),
    });
    let (mapped_tx, mapped_rx) = tokio::sync::watch::channel(false);
    let (mapping_tx, mapping_rx) = tokio::sync::watch::channel(Arc::default());
    let mut tasks = JoinSet::new();
    tasks.spawn(watch::local_pods(cfg.clone(), local_writer, queue.clone()));
    tasks.spawn(watch::namespace_maps(shared.clone(), mapped_tx, mapping_tx));
    tasks.spawn(crate::resources::run(
        reflectors,
        mapping_rx,
        mapped_rx.clone(),
    ));
    // Every worker waits for the local store's first list: through a channel that wakes them
    // all (kube's `wait_until_ready` wakes only one of several waiters).
    let listed = liqo_auth::ready::shared(&shared.local);
    for _ in 0..cfg.pod_workers.max(1) {
        tasks.spawn(worker::run(
            shared.clone(),
            listed.clone(),
            mapped_rx.clone(),
        ));
    }
    tasks.spawn(report(queue.clone()));
    tracing::info!(node = %cfg.node_name(), workers = cfg.pod_workers, "pod reflection started");
    match tasks.join_next().await {
        Some(Ok(what)) => Err(ReflectionError::Ended(what)),
        Some(Err(e)) => Err(ReflectionError::Task(e)),
        None => Err(ReflectionError::Ended("set of tasks")),
    }
}

/// How often [`report`] logs.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Logs, every [`REPORT_EVERY`] while there is work, what the queue holds and how long keys
/// waited for a worker and workers took: a backlog shows there first (`--pod-reflection-workers`,
/// the clients' `--*-api-server-qps`).
async fn report(queue: Arc<queue::Queue<key::Key>>) -> &'static str {
    let mut tick = tokio::time::interval(REPORT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let s = queue.take_stats();
        if s.handled == 0 && s.queued == 0 && s.active == 0 {
            continue;
        }
        let ms = |d: std::time::Duration| d.as_millis();
        tracing::info!(
            queued = s.queued,
            delayed = s.delayed,
            active = s.active,
            idle = s.idle,
            oldest_ms = ms(s.oldest),
            handled = s.handled,
            wait_mean_ms = ms(s.wait_mean),
            wait_max_ms = ms(s.wait_max),
            busy_mean_ms = ms(s.busy_mean),
            busy_max_ms = ms(s.busy_max),
            "pod reflection queue"
        );
    }
}

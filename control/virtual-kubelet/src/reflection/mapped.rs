//! A namespace mapped to the provider as pod reflection holds it: its remote name, the remote
//! stores the watches fill and the workers read, whether both are listed, and the tasks that
//! fill them (aborted with it).

use std::sync::Arc;

use control::{api::virtualkubelet::ShadowPod, lean::StoredPod};
use kube::{api::PartialObjectMeta, runtime::reflector::Store};
use tokio::task::AbortHandle;

/// A mapped namespace: its remote name, the remote stores, whether both are listed, and the
/// tasks that fill them (aborted on drop).
pub struct Namespace {
    /// The remote namespace.
    pub(super) remote: String,
    /// Its ShadowPods (ours; their metadata).
    pub(super) shadows: Store<PartialObjectMeta<ShadowPod>>,
    /// Its Pods (ours; without their spec).
    pub(super) pods: Store<StoredPod>,
    /// Set once both stores are listed.
    pub(super) ready: Arc<std::sync::atomic::AtomicBool>,
    /// The tasks that fill the stores.
    pub(super) tasks: Vec<AbortHandle>,
}

/// What a worker reads of a [`Namespace`].
pub struct NamespaceView {
    /// The remote namespace.
    pub remote: String,
    /// Its ShadowPods (ours; their metadata), once listed.
    pub shadows: Store<PartialObjectMeta<ShadowPod>>,
    /// Its Pods (ours; without their spec), once listed.
    pub pods: Store<StoredPod>,
    /// Whether both stores are listed.
    pub ready: bool,
}

impl Namespace {
    /// What a worker reads.
    pub fn view(&self) -> NamespaceView {
        NamespaceView {
            remote: self.remote.clone(),
            shadows: self.shadows.clone(),
            pods: self.pods.clone(),
            ready: self.ready.load(std::sync::atomic::Ordering::Acquire),
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

//! A namespace mapped to the provider as pod reflection holds it: its remote name, the remote
//! stores the watches fill and the workers read, whether both are listed, and the tasks that
//! fill them (aborted with it).

use std::sync::Arc;

use control::api::virtualkubelet::ShadowPod;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use tokio::task::AbortHandle;

/// A mapped namespace: its remote name, the remote stores, whether both are listed, and the
/// tasks that fill them (aborted on drop).
pub struct Namespace {
    /// The remote namespace.
    pub(super) remote: String,
    /// Its ShadowPods (ours).
    pub(super) shadows: Store<ShadowPod>,
    /// Its Pods (ours).
    pub(super) pods: Store<Pod>,
    /// Set once both stores are listed.
    pub(super) ready: Arc<std::sync::atomic::AtomicBool>,
    /// The tasks that fill the stores.
    pub(super) tasks: Vec<AbortHandle>,
}

/// What a worker reads of a [`Namespace`].
pub struct NamespaceView {
    /// The remote namespace.
    pub remote: String,
    /// Its ShadowPods (ours), once listed.
    pub shadows: Store<ShadowPod>,
    /// Its Pods (ours), once listed.
    pub pods: Store<Pod>,
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

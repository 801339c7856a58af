//! The virtual kubelet launcher: what the ResourceOffer controller calls to run or stop the
//! virtual kubelet of an accepted offer. [`vk::VkLauncher`] runs them (a task or a child
//! process each); [`NoopLauncher`] runs nothing (the controller still records
//! `virtualKubeletStatus`).

use futures::future::BoxFuture;

pub mod args;
pub mod vk;

use control::api::ClusterId;

/// The peer a virtual kubelet stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The provider's cluster ID (`spec.clusterId` of its offer).
    pub cluster_id: ClusterId,
    /// The namespace of the offer (our tenant namespace for the provider).
    pub namespace: String,
    /// The offer's name.
    pub offer: String,
}

/// Why a virtual kubelet could not be started or stopped.
#[derive(Debug, thiserror::Error)]
#[error("virtual kubelet for {peer}: {message}")]
pub struct LaunchError {
    /// The provider's cluster ID.
    pub peer: ClusterId,
    /// What went wrong.
    pub message: String,
}

/// Starts and stops virtual kubelets; both are idempotent.
pub trait Launcher: Send + Sync {
    /// Makes sure the peer's virtual kubelet runs.
    fn start<'a>(&'a self, peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>>;
    /// Makes sure the peer's virtual kubelet is stopped (and its node gone).
    fn stop<'a>(&'a self, peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>>;
}

/// Runs nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopLauncher;

impl Launcher for NoopLauncher {
    fn start<'a>(&'a self, _peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(async { Ok(()) })
    }

    fn stop<'a>(&'a self, _peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(async { Ok(()) })
    }
}

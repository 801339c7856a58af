//! The virtual node (§2.2): STUB, owned by the node helper.

use std::sync::Arc;

use crate::VkConfig;

/// Why the node loop failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Placeholder.
    #[error("not built yet")]
    Todo,
}

/// Keeps the virtual node applied, its conditions and Lease current, until dropped.
pub async fn run(cfg: Arc<VkConfig>) -> Result<(), NodeError> {
    let _ = cfg; // stub
    futures::future::pending().await
}

/// Drains the provider's virtual node (its pods evicted) and deletes it; nothing when absent.
pub async fn teardown(
    local: &kube::Client,
    foreign: &control::api::discovery::ClusterIdentity,
) -> Result<(), NodeError> {
    let _ = (local, foreign); // stub
    Ok(())
}

//! The kubelet API (§2.5): STUB, owned by the kubelet-API helper.

use std::sync::Arc;

use crate::VkConfig;

/// Why the kubelet API server failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Placeholder.
    #[error("not built yet")]
    Todo,
}

/// Serves the kubelet API on `cfg.listen` until dropped.
pub async fn serve(cfg: Arc<VkConfig>) -> Result<(), HttpError> {
    let _ = cfg; // stub
    futures::future::pending().await
}

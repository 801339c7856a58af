//! Pod reflection (§2.3, §2.6): STUB, owned by the reflection helper.

use std::sync::Arc;

use crate::VkConfig;

/// Why pod reflection failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectionError {
    /// Placeholder.
    #[error("not built yet")]
    Todo,
}

/// Reflects the pods on the virtual node until dropped.
pub async fn run(cfg: Arc<VkConfig>) -> Result<(), ReflectionError> {
    let _ = cfg; // stub
    futures::future::pending().await
}

//! Runs a virtual kubelet's three parts together until shutdown; the first to fail ends the
//! others (the caller restarts the whole).

use std::sync::Arc;

use crate::{VkConfig, error::VkError, http, node, reflection};

/// Runs the virtual node, pod reflection and the kubelet API until `shutdown` resolves
/// (`Ok`), or until one part fails or ends (`Err`; the others are dropped).
pub async fn run(
    cfg: VkConfig,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), VkError> {
    let cfg = Arc::new(cfg);
    tracing::info!(
        node = %cfg.node_name(),
        provider = %cfg.foreign.cluster_id,
        "virtual kubelet starting"
    );
    tokio::select! {
        r = node::run(cfg.clone()) => Err(r.map_or_else(VkError::Node, |()| VkError::Ended("the virtual node"))),
        r = reflection::run(cfg.clone()) => Err(r.map_or_else(VkError::Reflection, |()| VkError::Ended("pod reflection"))),
        r = http::serve(cfg.clone()) => Err(r.map_or_else(VkError::Http, |()| VkError::Ended("the kubelet API"))),
        () = shutdown => Ok(()),
    }
}

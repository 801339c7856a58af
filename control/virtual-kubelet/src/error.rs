//! Why a virtual kubelet stopped: each part's error, with its cause.

/// Why [`crate::run`] ended.
#[derive(Debug, thiserror::Error)]
pub enum VkError {
    /// The virtual node's loop failed.
    #[error("virtual node")]
    Node(#[source] crate::node::NodeError),
    /// Pod reflection failed.
    #[error("pod reflection")]
    Reflection(#[source] crate::reflection::ReflectionError),
    /// The kubelet API server failed.
    #[error("kubelet API")]
    Http(#[source] crate::http::HttpError),
    /// A part ended without an error and without a shutdown.
    #[error("{0} ended on its own")]
    Ended(&'static str),
}

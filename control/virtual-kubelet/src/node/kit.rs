//! What the node loop and the teardown share: the field manager of their writes, their error
//! and the wrapping of a failed kube call.

use control::virtual_node::ClaimError;

/// The field manager of the Node, its status and its Lease.
pub const FIELD_MANAGER: &str = "liqo-virtual-kubelet";

/// Why the node loop or a teardown step failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A call to the home API server failed.
    #[error("{what}")]
    Kube {
        /// What was done (`apply Node liqo-milan`).
        what: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// The Node of that name is not this provider's virtual node (says whose it is).
    #[error(transparent)]
    NotOurs(ClaimError),
    /// An object that does not serialize (never with the API's types).
    #[error("serialize {what}")]
    Serialize {
        /// What.
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// Wraps a kube error with what was done.
pub(crate) fn kerr(what: impl Into<String>) -> impl FnOnce(kube::Error) -> NodeError {
    let what = what.into();
    move |source| NodeError::Kube {
        what,
        source: Box::new(source),
    }
}

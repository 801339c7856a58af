//! Why a Kubernetes call of the operators failed ([`KubeError`]), and the one way to name the
//! call that failed ([`api`]).

/// Why a Kubernetes call failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// An API call failed.
    #[error("{what}")]
    Api {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// An object is not what it must be.
    #[error("{what}: {problem}")]
    Object {
        /// The object.
        what: String,
        /// What is wrong.
        problem: String,
    },
    /// The operators only read the record (the network manager writes TunnelEndpoints).
    #[error("the operators do not write TunnelEndpoints; the network manager does")]
    ReadOnly,
}

/// `what` failed with a kube error.
pub fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> KubeError {
    let what = what.into();
    move |source| KubeError::Api { what, source }
}

//! What can go wrong in the lab with control planes ([`K8sLabError`]).

use crate::{k8s::K8sError, lab::LabError, liqo::LiqoError};

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum K8sLabError {
    /// The lab's namespaces or daemons.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// The harness.
    #[error(transparent)]
    K8s(#[from] K8sError),
    /// The Liqo install.
    #[error(transparent)]
    Liqo(#[from] LiqoError),
    /// A Kubernetes API call.
    #[error("{what}")]
    Kube {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Anything else, with what was being done.
    #[error("{what}")]
    Other {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl K8sLabError {
    pub(crate) fn lab(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> K8sLabError {
        K8sLabError::Other {
            what: what.into(),
            source: source.into(),
        }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> K8sLabError {
        let what = what.into();
        move |source| K8sLabError::Kube { what, source }
    }
}

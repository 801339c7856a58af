//! What can go wrong in the harness ([`K8sError`]): every module of [`super`] returns it.

use std::path::{Path, PathBuf};

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// Building or finding the binaries failed.
    #[error("the Kubernetes binaries: {0}")]
    Binaries(String),
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// A file operation failed.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Making a certificate or key failed.
    #[error("making {what}")]
    Pki {
        /// What.
        what: String,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// A process could not be started.
    #[error("starting {what}")]
    Spawn {
        /// The process.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A process could not be started.
    #[error(transparent)]
    Process(#[from] dataplane::supervisor::Error),
    /// A component did not become ready in time; the end of its log says why.
    #[error("{what} not ready after {secs} s; the end of {log}:\n{tail}")]
    NotReady {
        /// The component.
        what: String,
        /// How long we waited.
        secs: u64,
        /// Its log.
        log: String,
        /// The last lines of it.
        tail: String,
    },
    /// A Kubernetes API call failed.
    #[error("{what}")]
    Kube {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A process that should run does not.
    #[error("{0} is not running")]
    NotRunning(String),
    /// Reading or writing a kubeconfig failed.
    #[error("kubeconfig {0}")]
    Kubeconfig(String),
    /// What a test made on shared clusters could not all be removed.
    #[error("{cluster}: still there {secs} s into the cleanup: {left}{}", last_failure(.failed))]
    Leftovers {
        /// The cluster.
        cluster: String,
        /// How long the cleanup tried.
        secs: u64,
        /// What is left.
        left: String,
        /// The last failed API call, if any.
        failed: Option<String>,
    },
}

/// `" (last failure: <it>)"`, or nothing.
fn last_failure(failed: &Option<String>) -> String {
    failed
        .as_deref()
        .map(|f| format!(" (last failure: {f})"))
        .unwrap_or_default()
}

impl K8sError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> K8sError {
        K8sError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> K8sError {
        let what = what.into();
        move |source| K8sError::Kube { what, source }
    }
}

//! What can go wrong installing or running Liqo on the harness's clusters ([`LiqoError`]).

use std::path::{Path, PathBuf};

use crate::k8s::K8sError;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum LiqoError {
    /// The harness failed (a client, a CRD, a free port).
    #[error(transparent)]
    K8s(#[from] K8sError),
    /// A Kubernetes API call failed.
    #[error("{what}")]
    Kube {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A file operation failed.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A chart file is not what it should be.
    #[error("{path}: {problem}")]
    Chart {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A component's binary is missing.
    #[error(
        "no {program} binary; build it with `cargo build -p {package} --bin {program}` or set LIQO_BIN_DIR"
    )]
    Binary {
        /// The program.
        program: &'static str,
        /// Its package.
        package: &'static str,
        /// Where it was looked for.
        #[source]
        source: crate::BinNotFound,
    },
    /// A component could not be started.
    #[error("starting {program} for {cluster}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The cluster.
        cluster: String,
        /// The cause.
        #[source]
        source: dataplane::supervisor::Error,
    },
    /// A component did not become ready in time; the end of its log says why.
    #[error("{program} of {cluster} not ready after {secs} s ({why}); the end of {log}:\n{tail}")]
    NotReady {
        /// The program.
        program: &'static str,
        /// The cluster.
        cluster: String,
        /// How long we waited.
        secs: u64,
        /// The last answer (or that the process exited).
        why: String,
        /// Its log.
        log: String,
        /// The last lines of it.
        tail: String,
    },
    /// An unknown component was asked for.
    #[error("unknown component {name:?}; known: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The programs of [`super::COMPONENTS`].
        known: String,
    },
    /// A component that should run (by the record) does not.
    #[error("{program} of {cluster} is not running")]
    NotRunning {
        /// The program.
        program: String,
        /// The cluster.
        cluster: String,
    },
    /// A component survived SIGKILL.
    #[error("{program} of {cluster} (pid {pid}) survived SIGKILL")]
    Stuck {
        /// The program.
        program: &'static str,
        /// The cluster.
        cluster: String,
        /// Its pid.
        pid: u32,
    },
    /// Randomness for the cluster ID was unavailable.
    #[error("no randomness for a cluster ID: {0}")]
    Random(String),
}

impl LiqoError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> LiqoError {
        LiqoError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> LiqoError {
        let what = what.into();
        move |source| LiqoError::Kube { what, source }
    }
}

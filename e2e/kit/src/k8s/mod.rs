//! Real Kubernetes control planes for tests, without Docker: for each cluster an etcd, a
//! kube-apiserver, a kube-controller-manager, a kube-scheduler and kwok (simulated nodes), all
//! built from the Go module proxy by `e2e/k8s/build.sh` and started as processes on loopback
//! with their own data, certificates, service-account keys, free ports, service and pod CIDRs.
//!
//! [`Clusters::up`] waits until every cluster serves, its controllers run and its nodes are
//! Ready; dropping the value (or [`down`] for a detached set started by `liqo-lab k8s up`) stops
//! every process and removes every file, also after a failure halfway.

mod bins;
mod cluster;
mod controllers;
mod crds;
mod pki;
mod procs;
mod restart;
mod shared;
mod state;
mod sweep;

use std::path::{Path, PathBuf};

pub use bins::{Binaries, binaries};
pub use cluster::{Cluster, client};
pub use crds::{MANAGER, install_crds};
pub use pki::write as write_file;
pub use procs::free_port;
pub use procs::stop as stop_procs;
pub(crate) use procs::using as procs_using;
pub use procs::{CommandLine, Proc, command_line, kill9};
pub use restart::Restarted;
pub use shared::{Lease, Pool, Shape};
pub use state::{Clusters, Down, Named, Options, ROOT, down, load};

/// Names given to clusters, in order.
pub const NAMES: &[&str] = &["rome", "milan", "turin", "naples", "venice", "genoa"];

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

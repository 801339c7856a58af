//! What went wrong in the lab.

use std::path::PathBuf;

use super::names::{BadTarget, Prefix};

/// Where lab state files live.
pub(crate) const STATE_DIR: &str = "/run/liqo-lab";

/// What went wrong in the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A lab with this prefix exists already.
    #[error(
        "lab {prefix} is already up ({namespaces} namespaces); run `liqo-lab --prefix {prefix} down` first"
    )]
    AlreadyUp {
        /// The prefix.
        prefix: Prefix,
        /// How many of its namespaces exist.
        namespaces: usize,
    },
    /// No lab with this prefix is up.
    #[error(
        "no lab with prefix {0} is up (no state in {STATE_DIR}); start one with `liqo-lab --prefix {0} up`"
    )]
    NotUp(Prefix),
    /// A target (`exec`, a pod, a node) that does not exist.
    #[error(transparent)]
    BadTarget(#[from] BadTarget),
    /// Building, starting or waiting for a part of the lab failed.
    #[error("{what}")]
    Build {
        /// The part.
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading or writing the lab state failed.
    #[error("lab state {path}")]
    State {
        /// The state file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Writing a daemon's file or reading its status failed.
    #[error(transparent)]
    Files(#[from] liqo_netops::files::FilesError),
    /// The gateway's or the overlay agents' files or status (the shared sinks) failed (boxed:
    /// a refusal carries the field and the problem).
    #[error(transparent)]
    Sink(Box<liqo_netops::files::sinks::SinkError>),
    /// A namespace operation failed.
    #[error(transparent)]
    Netns(#[from] dataplane::netns::Error),
    /// Peering, unpeering or moving a gateway failed or was refused (boxed: the core's error
    /// carries the failed step and every failed undo).
    #[error(transparent)]
    Peering(Box<liqo_peering::Error>),
}

impl From<liqo_peering::Error> for LabError {
    fn from(e: liqo_peering::Error) -> LabError {
        LabError::Peering(Box::new(e))
    }
}

impl From<liqo_netops::files::sinks::SinkError> for LabError {
    fn from(e: liqo_netops::files::sinks::SinkError) -> LabError {
        LabError::Sink(Box::new(e))
    }
}

impl LabError {
    /// `what` failed because of `source` (an error or a message).
    pub(crate) fn build(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> LabError {
        LabError::Build {
            what: what.into(),
            source: source.into(),
        }
    }
}

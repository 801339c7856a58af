//! Why `liqo-ipam serve` could not start, or stopped with an error.

use std::path::PathBuf;

use liqo_daemon::{FieldError, server::ServerError, source::ReadError, tasks::RunError};

use crate::{
    service::{ServiceError, server::ServeError},
    store::configmap::ConfigMapError,
};

/// Why the daemon could not start, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The SIGTERM and SIGINT handlers could not be installed.
    #[error("installing the signal handlers")]
    Signals(#[source] std::io::Error),
    /// The config file could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The config file does not parse.
    #[error("invalid config file {}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// The field at fault.
        #[source]
        source: FieldError,
    },
    /// The settings (flags over the file) are refused.
    #[error("invalid settings")]
    Settings(#[source] FieldError),
    /// The state file's directory could not be created.
    #[error("creating {}", dir.display())]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The ConfigMap store could not start (no client for the API server).
    #[error("starting the ConfigMap store")]
    Store(#[source] ConfigMapError),
    /// The stored state could not be opened (or the settings applied to it).
    #[error("opening the IPAM state in {state}")]
    Open {
        /// Where it is kept: `file <path>` or `configmap <namespace>/<name>`.
        state: String,
        /// The cause.
        #[source]
        source: ServiceError,
    },
    /// The gRPC server could not start, or failed.
    #[error(transparent)]
    Grpc(#[from] ServeError),
    /// The gRPC server stopped before the daemon.
    #[error("the gRPC server stopped unexpectedly")]
    GrpcStopped,
    /// The `/status` and `/metrics` server could not start.
    #[error(transparent)]
    Status(#[from] ServerError),
    /// A background task failed while running.
    #[error(transparent)]
    Run(#[from] RunError),
}

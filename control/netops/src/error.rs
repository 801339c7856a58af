//! Why a reconcile failed (it is retried).

use liqo_types::FieldError;

use control::network::{gateway, routes};

use crate::{files::FilesError, kube::KubeError};

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// A Kubernetes call.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// A file or a daemon's status.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The gateway's config could not be rendered.
    #[error(transparent)]
    Gateway(#[from] gateway::RenderError),
    /// An agent's config could not be rendered.
    #[error(transparent)]
    Overlay(#[from] routes::RenderError),
    /// The IPAM service could not be reached.
    #[error("connecting to liqo-ipam at {address}")]
    IpamConnect {
        /// Where.
        address: String,
        /// The cause.
        #[source]
        source: ipam::service::client::ClientError,
    },
    /// The IPAM service refused a call.
    #[error("liqo-ipam list: {0}")]
    IpamCall(String),
    /// The IPAM service answered a value that does not parse.
    #[error("liqo-ipam list answered a bad value")]
    IpamAnswer(#[source] FieldError),
    /// No gateway runs (the Lease has no holder).
    #[error("the Lease {0} names no gateway node yet")]
    NoGateway(String),
}

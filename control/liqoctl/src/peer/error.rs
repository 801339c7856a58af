//! Why a peering command failed: the error of `peer`, `unpeer` (with the removal of a
//! ForeignCluster that never authenticated) and their in-band forms.

use control::api::ClusterId;

use crate::client::ApiFailure;

/// Why a peering command failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// `unpeer in-band` with claims holding data on the peer.
    #[error(transparent)]
    Volumes(#[from] crate::volumes::VolumesError),
    /// The remote cluster ID is ours.
    #[error(
        "--cluster-id {0} is the ID of this cluster: a cluster cannot peer with itself (run the \
         command on a different cluster)"
    )]
    OwnCluster(ClusterId),
    /// The local identity could not be read.
    #[error("reading this cluster's identity")]
    Identity(#[source] liqo_auth::cluster::IdentityError),
    /// A ForeignCluster with this name speaks of another cluster.
    #[error(
        "ForeignCluster {name:?} exists for cluster ID {existing}, not {wanted}: choose another \
         name"
    )]
    NameTaken {
        /// The name.
        name: String,
        /// Its cluster ID.
        existing: String,
        /// The one asked for.
        wanted: ClusterId,
    },
    /// No ForeignCluster with this name.
    #[error("no ForeignCluster named {0:?} (to peer with a new cluster, use `peer out-of-band`)")]
    NotFound(String),
    /// The remote token could not be written.
    #[error("writing the remote cluster's token")]
    Token(#[source] liqo_auth::tokens::TokenError),
    /// A call to the apiserver failed.
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: ApiFailure,
    },
    /// A stage failed (the line says which and why).
    #[error("{0}")]
    Stage(String),
    /// `--timeout` passed (the line says while waiting for what).
    #[error("{0}")]
    Timeout(String),
    /// An in-band step failed (the line says which and why).
    #[error("{0}")]
    InBand(String),
    /// An object read from the apiserver could not be turned into JSON.
    #[error("{what}")]
    Json {
        /// Which object.
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The ForeignCluster was deleted while we waited.
    #[error("ForeignCluster {0:?} was deleted while waiting for it")]
    Deleted(String),
    /// The auth service answers for another cluster than `--cluster-id`.
    #[error(
        "{0} (--cluster-id): this peer command does not match the cluster at --auth-url, so \
         nothing was written and no token was sent; run `liqoctl generate peer-command` on the \
         cluster to peer with and use its line as printed"
    )]
    WrongCluster(control::identity::check::WrongCluster),
    /// Removing a ForeignCluster that never authenticated left something behind.
    #[error("{0}")]
    Leftovers(String),
}

/// Wraps a failed apiserver call with what was being done.
pub(crate) fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> PeerError {
    let what = what.into();
    move |e| PeerError::Kube {
        what,
        source: e.into(),
    }
}

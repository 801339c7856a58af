//! The controllers' I/O errors (their decisions, `control`'s, cannot fail but for a
//! quantity).

use crate::{identity::IdentityError, launcher::LaunchError};

/// Why a reconcile failed (it is requeued).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An apiserver call failed.
    #[error("{what}")]
    Kube {
        /// What was done (`apply ResourceRequest liqo-tenant-x/rome`).
        what: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// Our identity at a peer.
    #[error("identity")]
    Identity(#[source] Box<IdentityError>),
    /// Our local token or a peer's.
    #[error("token")]
    Token(#[source] Box<liqo_auth::tokens::TokenError>),
    /// Our own auth URL cannot be found (the ResourceRequest carries it).
    #[error("our auth URL")]
    AuthUrl(#[source] Box<liqo_auth::url::UrlError>),
    /// A node or pod with a quantity that does not parse.
    #[error("offer input")]
    OfferInput(#[source] Box<control::offer::BadInput>),
    /// A published offer with a quantity that does not parse.
    #[error("published offer")]
    Quantity(#[source] Box<control::quantity::InvalidQuantity>),
    /// A peering ClusterRole whose name makes no RoleBinding name.
    #[error("peering ClusterRole")]
    Name(#[source] Box<control::names::InvalidName>),
    /// The virtual kubelet launcher.
    #[error("launcher")]
    Launcher(#[source] Box<LaunchError>),
    /// A call to `liqo-ipam` failed (about a peer).
    #[error("liqo-ipam, for peer {peer}")]
    Ipam {
        /// The peer.
        peer: String,
        /// The cause.
        #[source]
        source: Box<liqo_peering::grpc::GrpcError>,
    },
    /// A storage fabric object could not be forged (the cause names the object and field).
    #[error("forging a storage fabric object")]
    Storage(#[source] Box<control::storage::StorageError>),
    /// An object without a name or namespace (never from the apiserver).
    #[error("object without {0}")]
    Incomplete(&'static str),
    /// A store's writer ended before it listed (its watch stream stopped).
    #[error("the store of {0} ended before it listed")]
    StoreEnded(&'static str),
}

/// Wraps a kube error with what was done.
pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube {
        what,
        source: Box::new(source),
    }
}

impl Error {
    /// The apiserver answered 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube { source, .. } if matches!(**source, kube::Error::Api(ref s) if s.code == 404))
    }
}

//! What can go wrong serving a request, and the one place errors become HTTP statuses.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
};
use control::consts::{labels, objects};
use liqo_types::FieldError;

use crate::tokens::TokenError;

/// Why a request failed. The message (never a token, a key or a cause's text) is the body of
/// the answer; the causes are logged.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The body is not a valid request.
    #[error("bad request: {0}")]
    BadRequest(#[from] FieldError),
    /// No `destinationClusterToken`.
    #[error("no destinationClusterToken: this cluster's auth token is required")]
    MissingToken,
    /// A `destinationClusterToken` that is not ours.
    #[error("destinationClusterToken is not this cluster's auth token")]
    WrongToken,
    /// An identity was already issued to this cluster ID for another CSR.
    #[error(
        "an identity was already issued to cluster {cluster_id} for another CSR (Secret {namespace}/{name} exists)",
        name = objects::REMOTE_CERTIFICATE_SECRET
    )]
    AlreadyIssued {
        /// The requesting cluster.
        cluster_id: String,
        /// Its tenant namespace.
        namespace: String,
    },
    /// The same CSR again without a valid proof of possession newer than the last one
    /// accepted: a replay (or an upstream consumer asking twice). Nothing stored is answered.
    #[error(
        "an identity was already issued to cluster {cluster_id}: a repeated request must prove \
         possession of the CSR's key with a proof newer than the last one ({why})"
    )]
    Replay {
        /// The requesting cluster.
        cluster_id: String,
        /// What was missing or too old.
        why: &'static str,
    },
    /// The tenant namespace's name is held by a namespace of another cluster.
    #[error(
        "namespace {namespace} exists without label {label}={cluster_id}",
        label = labels::CLUSTER_ID
    )]
    NamespaceTaken {
        /// The namespace.
        namespace: String,
        /// The requesting cluster.
        cluster_id: String,
    },
    /// An existing namespace's name is not a valid namespace name (cannot happen with a real
    /// apiserver).
    #[error("namespace name {namespace:?} is invalid")]
    NamespaceName {
        /// The name.
        namespace: String,
        /// Why.
        #[source]
        source: control::names::InvalidName,
    },
    /// The requesting cluster's token cannot be stored.
    #[error("storing the token of cluster {cluster_id}")]
    StoreToken {
        /// The requesting cluster.
        cluster_id: String,
        /// The cause.
        #[source]
        source: Box<TokenError>,
    },
    /// A basic ClusterRole whose name makes no RoleBinding name.
    #[error("a basic peering ClusterRole cannot be bound")]
    RoleName(#[source] control::names::InvalidName),
    /// An apiserver call failed.
    #[error("{what}")]
    Kube {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// The apiserver did not sign the request in time.
    #[error("CertificateSigningRequest {name} not signed within {secs} s")]
    NotSigned {
        /// The CSR object.
        name: String,
        /// How long we waited.
        secs: u64,
    },
    /// The CSR was denied or failed.
    #[error("CertificateSigningRequest {name} is {condition}: {message}")]
    Refused {
        /// The CSR object.
        name: String,
        /// `Denied` or `Failed`.
        condition: String,
        /// Its message.
        message: String,
    },
    /// A basic peering ClusterRole is missing (or lacks the label of the basic set).
    #[error(
        "ClusterRole {name} labelled {label}=basic not found",
        label = labels::REMOTE_PEERING_PERMISSIONS
    )]
    NoBasicRole {
        /// Its name.
        name: &'static str,
    },
}

impl AuthError {
    /// The error of a failed apiserver call.
    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> AuthError {
        let what = what.into();
        move |source| AuthError::Kube {
            what,
            source: Box::new(source),
        }
    }

    /// The answer's status: 400 bad request, 401 no token, 403 wrong token, identity already
    /// issued (as upstream) or a repeated request without a valid proof (a replay), 409 tenant namespace name held by another cluster's namespace, 504
    /// not signed in time, 500 otherwise.
    pub fn status(&self) -> StatusCode {
        match self {
            AuthError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AuthError::MissingToken => StatusCode::UNAUTHORIZED,
            AuthError::WrongToken | AuthError::AlreadyIssued { .. } | AuthError::Replay { .. } => {
                StatusCode::FORBIDDEN
            }
            AuthError::NotSigned { .. } => StatusCode::GATEWAY_TIMEOUT,
            AuthError::NamespaceTaken { .. } => StatusCode::CONFLICT,
            AuthError::NamespaceName { .. }
            | AuthError::StoreToken { .. }
            | AuthError::RoleName(_)
            | AuthError::Kube { .. }
            | AuthError::Refused { .. }
            | AuthError::NoBasicRole { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The outcome label of the request metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            AuthError::BadRequest(_) => "bad_request",
            AuthError::MissingToken => "no_token",
            AuthError::WrongToken => "wrong_token",
            AuthError::AlreadyIssued { .. } => "already_issued",
            AuthError::Replay { .. } => "replay",
            AuthError::NotSigned { .. } => "not_signed",
            AuthError::NamespaceTaken { .. } => "namespace_taken",
            _ => "error",
        }
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %liqo_types::chain::chain(&self), "request failed");
        } else {
            tracing::info!(status = status.as_u16(), "request refused: {self}");
        }
        (status, format!("{self}\n")).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_as_upstream_and_bodies_without_causes() {
        let cases = [
            (
                AuthError::BadRequest(liqo_types::field::bad("certificateSigningRequest", "x")),
                400,
            ),
            (AuthError::MissingToken, 401),
            (AuthError::WrongToken, 403),
            (
                AuthError::AlreadyIssued {
                    cluster_id: "a".into(),
                    namespace: "liqo-tenant-a".into(),
                },
                403,
            ),
            (
                AuthError::Replay {
                    cluster_id: "a".into(),
                    why: "no proof",
                },
                403,
            ),
            (
                AuthError::NamespaceTaken {
                    namespace: "liqo-tenant-a".into(),
                    cluster_id: "a".into(),
                },
                409,
            ),
            (
                AuthError::NotSigned {
                    name: "liqo-identity-x".into(),
                    secs: 30,
                },
                504,
            ),
            (
                AuthError::NoBasicRole {
                    name: "liqo-remote-peering-basic",
                },
                500,
            ),
        ];
        for (e, status) in cases {
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
        let e = AuthError::Kube {
            what: "creating namespace liqo-tenant-x".into(),
            source: Box::new(kube::Error::Api(
                kube::core::Status::failure("secret detail", "Forbidden")
                    .with_code(403)
                    .boxed(),
            )),
        };
        assert_eq!(e.status().as_u16(), 500);
        assert!(!e.to_string().contains("secret detail"));
    }
}

//! The auth service (provider side, control-plane.md §1.2 step 4): `GET /ids` answers the
//! cluster's identity; `POST /identity/certificate` takes a consumer's CSR with this
//! cluster's token and answers 202 with a certificate signed by the cluster's
//! `kubernetes.io/kube-apiserver-client` signer, the tenant namespace and the apiserver's URL and
//! CA. Served over HTTPS with a certificate made in-process (self-signed, as upstream), or plain
//! HTTP when configured. Errors become statuses in one place ([`AuthError::status`]).
//!
//! The identity and the local token are read at bind and kept in memory (the token refreshed by
//! the loop that keeps its Secret existing), so `GET /ids` and the checks of a request
//! ([`validate`]: body, token, CSR) make no apiserver call: a request that fails them causes no
//! apiserver request and creates nothing. Against floods: a bounded number of connections (the
//! excess closed at once), a TLS handshake timeout, a header timeout, one request per
//! connection, a body limit and a timeout on handling a request (the loop is [`crate::https`]'s).

mod config;
mod error;
mod issue;
mod roles;
mod tenant;
pub mod tls;
pub mod validate;
mod write;

use std::{future::Future, net::SocketAddr, sync::Arc};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Request, State},
    http::StatusCode,
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use control::{api::discovery::ClusterIdentity, consts::auth, identity::ClusterInfo};
use kube::Client;
use tokio::{net::TcpListener, sync::watch};
use tokio_rustls::TlsAcceptor;

pub use config::Config;
pub use error::AuthError;

use crate::{
    cluster::{self, IdentityError},
    https,
    tokens::{self, TokenError},
};
use control::identity::AuthToken;

/// Why the service cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate cannot be made.
    #[error("making the service's TLS certificate")]
    Tls(#[source] tls::TlsError),
    /// The local token cannot be read or created.
    #[error("the local auth token")]
    LocalToken(#[source] TokenError),
    /// The local identity cannot be read.
    #[error("the local cluster identity")]
    LocalIdentity(#[source] IdentityError),
}

struct AppState {
    client: Client,
    config: Config,
    /// The local identity, read at bind.
    local: ClusterIdentity,
    /// The local token, read (or made) at bind and refreshed by the token keeper.
    token: watch::Receiver<AuthToken>,
    /// One issuance at a time: the check that no identity exists and the writes that follow
    /// are not interleaved with another request's.
    issuing: tokio::sync::Mutex<()>,
}

/// A bound service, not yet serving.
pub struct Server {
    listener: TcpListener,
    tls: Option<(TlsAcceptor, String)>,
    state: Arc<AppState>,
    token: watch::Sender<AuthToken>,
}

/// Binds the service: reads the local identity and ensures the local token (so a
/// misconfiguration fails at start), makes the TLS certificate, binds the address.
pub async fn bind(config: Config, client: Client) -> Result<Server, ServeError> {
    let local = cluster::local_identity(&client, &config.namespace)
        .await
        .map_err(ServeError::LocalIdentity)?;
    let token = tokens::ensure_local_token(&client, &config.namespace)
        .await
        .map_err(ServeError::LocalToken)?;
    let (token, token_rx) = watch::channel(token);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
    let tls = if config.plain_http {
        None
    } else {
        let (acceptor, pem) =
            tls::self_signed(config.listen.ip(), &config.tls_sans).map_err(ServeError::Tls)?;
        Some((acceptor, pem))
    };
    Ok(Server {
        listener,
        tls,
        state: Arc::new(AppState {
            client,
            config,
            local,
            token: token_rx,
            issuing: tokio::sync::Mutex::new(()),
        }),
        token,
    })
}

/// Binds and serves until `shutdown` completes.
pub async fn serve(
    config: Config,
    client: Client,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    bind(config, client).await?.run(shutdown).await;
    Ok(())
}

impl Server {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The service's certificate (PEM), `None` for plain HTTP.
    pub fn certificate_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|(_, pem)| pem.as_str())
    }

    /// Serves until `shutdown` completes (connections in flight are dropped with the runtime).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let Server {
            listener,
            tls,
            state,
            token,
        } = self;
        let keeper = tokio::spawn(tokens::keep_local_token(
            state.client.clone(),
            state.config.namespace.clone(),
            state.config.token_check_period,
            move |t| {
                token.send_if_modified(|old| {
                    let changed = *old != t;
                    *old = t;
                    changed
                });
            },
        ));
        let router = router(state.clone());
        let limits = https::Limits {
            handshake: state.config.handshake_timeout,
            header: state.config.header_timeout,
            request: state.config.request_timeout,
            max_connections: state.config.max_connections,
            keep_alive: None,
        };
        https::serve(
            "liqo-auth",
            listener,
            tls.map(|(a, _)| a),
            router,
            limits,
            state.config.metrics.connections(),
            shutdown,
        )
        .await;
        keeper.abort();
    }
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(auth::IDS_PATH, get(ids))
        .route(auth::CERTIFICATE_PATH, post(certificate))
        .layer(DefaultBodyLimit::max(state.config.max_body))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            request_timeout,
        ))
        .with_state(state)
}

/// Answers 503 when handling a request (reading its body included) takes longer than the
/// configured limit; the handling is dropped.
async fn request_timeout(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let path = match request.uri().path() {
        auth::IDS_PATH => "ids",
        auth::CERTIFICATE_PATH => "certificate",
        _ => "other",
    };
    let limit = state.config.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => {
            if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                state.config.metrics.request(path, "too_large");
            }
            response
        }
        Err(_elapsed) => {
            state.config.metrics.request(path, "timeout");
            tracing::warn!(path, "request not handled within {} s", limit.as_secs());
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("request not handled within {} s\n", limit.as_secs()),
            )
                .into_response()
        }
    }
}

/// The identity read at bind: no apiserver call.
async fn ids(State(state): State<Arc<AppState>>) -> Response {
    state.config.metrics.request("ids", "ok");
    Json(ClusterInfo {
        cluster_id: state.local.cluster_id.clone(),
        cluster_name: state.local.cluster_name.clone(),
    })
    .into_response()
}

async fn certificate(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let result = async {
        // The token in memory: a request failing the checks makes no apiserver call.
        let ours = state.token.borrow().clone();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let request = validate::validate(&body, &ours, &state.local.cluster_id, now_ms)?;
        let _one_at_a_time = state.issuing.lock().await;
        issue::issue(
            &state.client,
            &state.config,
            &state.local.cluster_id,
            request,
        )
        .await
    }
    .await;
    match result {
        Ok(issued) => {
            let (outcome, response) = match issued {
                issue::Issued::New(r) => ("accepted", r),
                issue::Issued::Again(r) => ("reissued", r),
            };
            state.config.metrics.request("certificate", outcome);
            (StatusCode::ACCEPTED, Json(response)).into_response()
        }
        Err(e) => {
            state.config.metrics.request("certificate", e.outcome());
            e.into_response()
        }
    }
}

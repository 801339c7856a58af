//! The auth service (provider side, control-plane.md §1.2 step 4): `GET /ids` answers the
//! cluster's identity; `POST /identity/certificate` takes a consumer's CSR with this
//! cluster's token and answers 202 with a certificate signed by the cluster's
//! `kubernetes.io/kube-apiserver-client` signer, the tenant namespace and the apiserver's URL and
//! CA. Served over HTTPS with a certificate made in-process (self-signed, as upstream), or plain
//! HTTP when configured. Nothing is created for a request that fails its checks
//! ([`validate`]); errors become statuses in one place ([`AuthError::status`]).

mod error;
mod issue;
mod tls;
pub mod validate;

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use control::{api::discovery::ClusterIdentity, consts::auth, identity::ClusterInfo};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use kube::Client;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
};
use tokio_rustls::TlsAcceptor;

pub use error::AuthError;

use crate::{
    cluster::{self, IdentityError},
    metrics::Metrics,
    tokens::{self, TokenError},
};

/// How the service runs.
#[derive(Clone)]
pub struct Config {
    /// Where it listens (port 0: any free port, see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// The Liqo namespace (identity ConfigMap, tokens).
    pub namespace: String,
    /// The apiserver URL the identity reply carries.
    pub api_server_url: String,
    /// The apiserver CA (PEM) the identity reply carries, if any.
    pub api_server_ca: Option<Vec<u8>>,
    /// Plain HTTP instead of HTTPS.
    pub plain_http: bool,
    /// Names and addresses of the service's certificate besides `localhost`, `127.0.0.1` and
    /// the listen address.
    pub tls_sans: Vec<String>,
    /// How long to wait for the signer.
    pub signing_timeout: Duration,
    /// How often the local token Secret is checked (and recreated when deleted).
    pub token_check_period: Duration,
    /// Where requests are counted.
    pub metrics: Metrics,
}

impl Config {
    /// A configuration with the defaults: HTTPS, 30 s for the signer, the token checked every 5 s.
    pub fn new(
        listen: SocketAddr,
        namespace: impl Into<String>,
        api_server_url: impl Into<String>,
        api_server_ca: Option<Vec<u8>>,
    ) -> Self {
        Config {
            listen,
            namespace: namespace.into(),
            api_server_url: api_server_url.into(),
            api_server_ca,
            plain_http: false,
            tls_sans: Vec::new(),
            signing_timeout: Duration::from_secs(30),
            token_check_period: Duration::from_secs(5),
            metrics: Metrics::default(),
        }
    }
}

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

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

struct AppState {
    client: Client,
    config: Config,
    /// The local identity, read at bind.
    local: ClusterIdentity,
    /// One issuance at a time: the check that no identity exists and the writes that follow
    /// are not interleaved with another request's.
    issuing: tokio::sync::Mutex<()>,
}

/// A bound service, not yet serving.
pub struct Server {
    listener: TcpListener,
    tls: Option<(TlsAcceptor, String)>,
    state: Arc<AppState>,
}

/// Binds the service: reads the local identity and ensures the local token (so a
/// misconfiguration fails at start), makes the TLS certificate, binds the address.
pub async fn bind(config: Config, client: Client) -> Result<Server, ServeError> {
    let local = cluster::local_identity(&client, &config.namespace)
        .await
        .map_err(ServeError::LocalIdentity)?;
    tokens::ensure_local_token(&client, &config.namespace)
        .await
        .map_err(ServeError::LocalToken)?;
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
            issuing: tokio::sync::Mutex::new(()),
        }),
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
        } = self;
        let keeper = tokio::spawn(tokens::keep_local_token(
            state.client.clone(),
            state.config.namespace.clone(),
            state.config.token_check_period,
        ));
        let router = router(state.clone());
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(
            "liqo-auth serving on {scheme}://{}",
            listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        );
        let acceptor = tls.map(|(a, _)| a);
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let router = router.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => match acceptor.accept(stream).await {
                        Ok(tls) => connection(tls, router, peer).await,
                        Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    },
                    None => connection(stream, router, peer).await,
                }
            });
        }
        keeper.abort();
        tracing::info!("liqo-auth stopped");
    }
}

async fn connection<I>(io: I, router: Router, peer: SocketAddr)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(router);
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(io), service)
        .await
    {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(auth::IDS_PATH, get(ids))
        .route(auth::CERTIFICATE_PATH, post(certificate))
        .with_state(state)
}

async fn ids(State(state): State<Arc<AppState>>) -> Response {
    let result = cluster::local_identity(&state.client, &state.config.namespace)
        .await
        .map_err(|e| AuthError::LocalIdentity(Box::new(e)));
    match result {
        Ok(id) => {
            state.config.metrics.request("ids", "ok");
            Json(ClusterInfo {
                cluster_id: id.cluster_id,
                cluster_name: id.cluster_name,
            })
            .into_response()
        }
        Err(e) => {
            state.config.metrics.request("ids", e.outcome());
            e.into_response()
        }
    }
}

async fn certificate(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let result = async {
        let ours = tokens::ensure_local_token(&state.client, &state.config.namespace)
            .await
            .map_err(|e| AuthError::LocalToken(Box::new(e)))?;
        let request = validate::validate(&body, &ours, &state.local.cluster_id)?;
        let _one_at_a_time = state.issuing.lock().await;
        issue::issue(&state.client, &state.config, request).await
    }
    .await;
    match result {
        Ok(response) => {
            state.config.metrics.request("certificate", "accepted");
            (StatusCode::ACCEPTED, Json(response)).into_response()
        }
        Err(e) => {
            state.config.metrics.request("certificate", e.outcome());
            e.into_response()
        }
    }
}

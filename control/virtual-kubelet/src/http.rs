//! The kubelet API (§2.5): the HTTPS server the home API server calls for `pods/log`,
//! `pods/exec` and `pods/attach` of the pods on the virtual node, relayed to the same pod on
//! the provider (its remote namespace per the NamespaceMap, its name and container names kept).
//!
//! * TLS ([`tls`]): a self-signed serving certificate; client certificates required and
//!   verified against `cfg.client_ca` (the CA of the apiserver's kubelet client certificate).
//!   Without a client CA only `/healthz` is served (a warning at start).
//! * Authorization ([`authz`]): every route but `/healthz` needs the certificate's subject
//!   allowed `nodes/proxy` of this node by the home API server (a SubjectAccessReview), as a
//!   kubelet in webhook mode.
//! * Routes ([`query`]): `/healthz`, `/pods`, `/containerLogs/{ns}/{pod}/{container}` (logs
//!   streamed chunk by chunk, [`logs`]), `/exec/{ns}/{pod}[/{uid}]/{container}` and
//!   `/attach/…` (a WebSocket `v4`/`v5.channel.k8s.io` bridged to the provider's exec, [`exec`]).
//! * Bounds: at most [`MAX_CONNECTIONS`] connections (the excess closed at once; an exec
//!   session counts as its connection), a TLS handshake timeout and a header timeout; streams
//!   (follow, exec) last as long as both ends.
//! * Ownership: every connection's task, and every exec bridge through its connection's task,
//!   belongs to the [`serve_on`] future: dropping it ends every session at once.
//!
//! It never serves a pod the provider's copy of which does not carry our origin label, never
//! changes an object on either cluster (a SubjectAccessReview is a question, not stored), and
//! never logs a request's content.

pub mod authz;
mod common;
mod exec;
mod logs;
mod lookup;
pub mod query;
pub mod tls;

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use hyper::{Request, Response, StatusCode, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    net::TcpListener,
    sync::{OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
};
use tokio_rustls::TlsAcceptor;

use crate::VkConfig;
use common::{Body, Bridges, lock, relay, text};
use query::Route;

/// The most connections served at once.
pub const MAX_CONNECTIONS: usize = 512;
/// How long a client may take for the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the kubelet API server failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The TLS configuration could not be made.
    #[error("the kubelet API's TLS")]
    Tls(#[source] tls::TlsError),
    /// The listening address could not be bound.
    #[error("listening on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Serves the kubelet API on `cfg.listen` until dropped.
pub async fn serve(cfg: Arc<VkConfig>) -> Result<(), HttpError> {
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| HttpError::Bind {
            addr: cfg.listen,
            source,
        })?;
    serve_on(cfg, listener).await
}

/// Serves the kubelet API on `listener` until dropped (tests bind port 0 themselves).
pub async fn serve_on(cfg: Arc<VkConfig>, listener: TcpListener) -> Result<(), HttpError> {
    let config = tls::server_config(&cfg.node_name(), cfg.node_ip, cfg.client_ca.as_deref())
        .map_err(HttpError::Tls)?;
    let authenticated = cfg.client_ca.is_some();
    if !authenticated {
        tracing::warn!(
            "the kubelet API has no client CA: serving /healthz only (no logs, no exec)"
        );
    }
    let acceptor = TlsAcceptor::from(Arc::new(config));
    tracing::info!(
        addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "kubelet API serving"
    );
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // Every connection's task (and through it its exec bridges): aborted when this future is
    // dropped, so that a stopped server relays nothing more.
    let mut conns = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            Some(done) = conns.join_next(), if !conns.is_empty() => {
                if let Err(e) = done {
                    tracing::warn!(error = %e, "kubelet API: a connection's task failed");
                }
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet API: accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "kubelet API: too many connections: closing");
            continue;
        };
        conns.spawn(connection(
            cfg.clone(),
            acceptor.clone(),
            authenticated,
            stream,
            peer,
            slot,
        ));
    }
}

/// Serves one connection: its TLS handshake, its requests, then its exec bridge if one was
/// upgraded to; `slot` (one of [`MAX_CONNECTIONS`]) is held until all of them end.
async fn connection(
    cfg: Arc<VkConfig>,
    acceptor: TlsAcceptor,
    authenticated: bool,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    slot: OwnedSemaphorePermit,
) {
    let _slot = slot;
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "kubelet API: TLS handshake failed");
            return;
        }
        Err(_elapsed) => {
            tracing::debug!(%peer, "kubelet API: TLS handshake timed out");
            return;
        }
    };
    let who = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| authz::subject(c));
    let who = Arc::new(who);
    let bridges: Bridges = Arc::default();
    let service = {
        let bridges = bridges.clone();
        service_fn(move |req| {
            let (cfg, who, bridges) = (cfg.clone(), who.clone(), bridges.clone());
            async move { Ok::<_, Infallible>(handle(cfg, authenticated, &who, &bridges, req).await) }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(tls), service)
        .with_upgrades();
    if let Err(e) = conn.await {
        tracing::debug!(%peer, error = %e, "kubelet API: connection ended with an error");
    }
    // The connection handed its socket over to a bridge, if any: wait for it here, so that
    // aborting this task aborts the bridge too.
    let mut started = std::mem::take(&mut *lock(&bridges));
    while let Some(done) = started.join_next().await {
        if let Err(e) = done {
            tracing::warn!(%peer, error = %e, "kubelet API: an exec bridge failed");
        }
    }
}

/// Answers one request. `authenticated`: the client presented a certificate the client CA
/// signed (the TLS layer refused any other client), whose subject is `who`; `false` when there
/// is no client CA.
async fn handle(
    cfg: Arc<VkConfig>,
    authenticated: bool,
    who: &Option<authz::Subject>,
    bridges: &Bridges,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let route = match query::route(req.uri().path()) {
        Ok(r) => r,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let pairs = query::pairs(req.uri().query());
    match route {
        Route::Healthz => text(StatusCode::OK, "ok"),
        _ if !authenticated => text(
            StatusCode::FORBIDDEN,
            "the kubelet API of this virtual node has no client CA: only /healthz is served",
        ),
        _ => match authorize(&cfg, who, req.method()).await {
            Some(refused) => refused,
            None => serve_route(cfg, route, &pairs, bridges, req).await,
        },
    }
}

/// `None` when `who` may call the kubelet API with `method`; else the response saying why not.
async fn authorize(
    cfg: &VkConfig,
    who: &Option<authz::Subject>,
    method: &hyper::Method,
) -> Option<Response<Body>> {
    let Some(who) = who else {
        return Some(text(
            StatusCode::FORBIDDEN,
            "the client certificate has no subject common name",
        ));
    };
    let verb = authz::verb(method);
    let node = cfg.node_name();
    match authz::allowed(&cfg.local, who, verb, &node).await {
        Ok(true) => None,
        Ok(false) => Some(text(
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden (user={}, verb={verb}, resource=nodes, subresource=proxy, name={node})",
                who.user
            ),
        )),
        Err(e) => Some(relay(
            "asking the home API server (SubjectAccessReview)",
            &e,
        )),
    }
}

/// Answers an authorized request for `route`.
async fn serve_route(
    cfg: Arc<VkConfig>,
    route: Route,
    pairs: &[(String, String)],
    bridges: &Bridges,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    match route {
        Route::Healthz | Route::NotFound => text(StatusCode::NOT_FOUND, "404 page not found"),
        Route::Pods => pods(),
        Route::Logs(t) => logs::handle(&cfg, &t, pairs).await,
        Route::Exec(t) => exec::handle(cfg, t, pairs, true, bridges, req).await,
        Route::Attach(t) => exec::handle(cfg, t, pairs, false, bridges, req).await,
    }
}

/// `/pods`: an empty PodList (the pods are the home cluster's; nothing asks the kubelet).
fn pods() -> Response<Body> {
    let mut r = text(
        StatusCode::OK,
        r#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}"#,
    );
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

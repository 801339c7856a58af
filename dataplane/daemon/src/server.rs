//! The status and metrics server: `GET /status` (JSON) and `GET /metrics` (Prometheus text),
//! each built on request by a closure the daemon gives. Nothing else: no endpoint changes state.
//! It binds a loopback address by default; a daemon that binds another one is warned about.

use std::{future::Future, io, net::SocketAddr, sync::Arc};

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use prometheus_client::{encoding::text::encode, registry::Registry};
use serde::Serialize;
use tokio::net::TcpListener;

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding its address.
    #[error("binding {addr} for /status and /metrics")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Binding the address of [`spawn_metrics`].
    #[error("binding {addr} for /metrics")]
    MetricsBind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Serving failed.
    #[error("serving /status and /metrics on {addr}")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// A bound, not yet serving, status server.
#[derive(Debug)]
pub struct StatusServer {
    listener: TcpListener,
    addr: SocketAddr,
}

impl StatusServer {
    /// Binds `addr` (bind before starting anything, so a busy port fails the start).
    pub async fn bind(addr: SocketAddr) -> Result<StatusServer, ServerError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "/status and /metrics are served on a non-loopback address");
        }
        Ok(StatusServer { listener, addr })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `/status` from `status` and `/metrics` from the registry `metrics` builds. The
    /// future runs until the runtime drops it, and returns only if serving failed: spawn it
    /// into [`Tasks`](crate::tasks::Tasks) so that the daemon stops with that error.
    pub fn serve<S, FS, FM>(
        self,
        status: FS,
        metrics: FM,
    ) -> impl Future<Output = Result<(), ServerError>> + Send + 'static
    where
        S: Serialize,
        FS: Fn() -> S + Clone + Send + Sync + 'static,
        FM: Fn() -> Registry + Clone + Send + Sync + 'static,
    {
        let app = axum::Router::new()
            .route("/status", get(move || async move { json(&status()) }))
            .route(
                "/metrics",
                get(move || async move { prometheus(&metrics()) }),
            );
        let StatusServer { listener, addr } = self;
        async move {
            axum::serve(listener, app)
                .await
                .map_err(|source| ServerError::Serve { addr, source })
        }
    }
}

/// Serves `GET /metrics` alone from `registry` on `addr` in the background, for the daemons
/// whose status lives elsewhere (the Kubernetes components write theirs in their objects);
/// `None`: no metrics server. Binding fails the start; a later failure is logged (metrics are
/// not worth stopping a controller for). Returns the address bound.
pub async fn spawn_metrics(
    addr: Option<SocketAddr>,
    registry: Arc<Registry>,
) -> Result<Option<SocketAddr>, ServerError> {
    let Some(addr) = addr else { return Ok(None) };
    // A pod serves its metrics on every address (0.0.0.0): no warning here, unlike /status.
    let bind = |source| ServerError::MetricsBind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let r = registry.clone();
            async move { prometheus(&r) }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, %addr, "the metrics server stopped");
        }
    });
    Ok(Some(addr))
}

fn json(s: &impl Serialize) -> Response {
    match serde_json::to_string(s) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding /status");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("encoding the status: {e}\n"),
            )
                .into_response()
        }
    }
}

fn prometheus(r: &Registry) -> Response {
    let mut body = String::new();
    match encode(&mut body, r) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding /metrics");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("encoding the metrics: {e}\n"),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use prometheus_client::metrics::gauge::Gauge;

    use super::*;

    fn request(addr: SocketAddr, head: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(format!("{head}\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_status_and_metrics_and_nothing_else() {
        let server = StatusServer::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = server.local_addr();
        let task = tokio::spawn(server.serve(
            || serde_json::json!({"ok": true}),
            || {
                let mut r = Registry::with_prefix("t");
                let g: Gauge = Gauge::default();
                g.set(7);
                r.register("seven", "Seven", g);
                r
            },
        ));
        let (status, metrics, post, other) = tokio::task::spawn_blocking(move || {
            (
                request(addr, "GET /status HTTP/1.1"),
                request(addr, "GET /metrics HTTP/1.1"),
                request(addr, "POST /status HTTP/1.1"),
                request(addr, "GET /quit HTTP/1.1"),
            )
        })
        .await
        .unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        assert!(
            status.contains("application/json") && status.ends_with("{\"ok\":true}"),
            "{status}"
        );
        assert!(metrics.contains("t_seven 7"), "{metrics}");
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        task.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_alone_are_served_from_the_shared_registry() {
        assert_eq!(spawn_metrics(None, Arc::default()).await.unwrap(), None);
        let mut r = Registry::with_prefix("m");
        let g: Gauge = Gauge::default();
        r.register("n", "N", g.clone());
        let addr = spawn_metrics(Some("127.0.0.1:0".parse().unwrap()), Arc::new(r))
            .await
            .unwrap()
            .unwrap();
        g.set(3); // Read on each request: later changes show.
        let (metrics, status) = tokio::task::spawn_blocking(move || {
            (
                request(addr, "GET /metrics HTTP/1.1"),
                request(addr, "GET /status HTTP/1.1"),
            )
        })
        .await
        .unwrap();
        assert!(metrics.contains("m_n 3"), "{metrics}");
        assert!(status.starts_with("HTTP/1.1 404"), "{status}");
        // A busy address is named as the metrics' own.
        let e = spawn_metrics(Some(addr), Arc::default()).await.unwrap_err();
        assert!(matches!(e, ServerError::MetricsBind { .. }), "{e}");
        assert_eq!(e.to_string(), format!("binding {addr} for /metrics"));
    }

    #[tokio::test]
    async fn a_busy_address_is_an_error() {
        let first = StatusServer::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let e = StatusServer::bind(first.local_addr()).await.unwrap_err();
        assert!(matches!(e, ServerError::Bind { .. }), "{e}");
        assert!(e.to_string().contains(&first.local_addr().to_string()));
    }
}

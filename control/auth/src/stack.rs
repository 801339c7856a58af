//! The HTTP stack of the controller-manager's and the virtual kubelet's Kubernetes clients,
//! local and peers' ([`client`], and [`crate::peer_client`]): kube's layers over hyper's pooled
//! client, behind a rate limit, whose idle connections close after [`POOL_IDLE_TIMEOUT`]; an
//! HTTP proxy without credentials is reached through a tunnel ([`over`]). It never decides
//! where to connect or with which timeouts: the caller's config and connector do.
//!
//! Why its own pool timing: kube's builder gives hyper's pool no timer, so an idle connection
//! was closed only when a later request to its server found it expired (after 90 s). A burst of
//! ten thousand pods opened tens of connections (one per request in flight); they outlived it,
//! each holding its buffers, TLS state and task, made in the middle of the burst's memory: the
//! process did not come back to its idle memory after every pod was deleted.
//!
//! Why HTTP/2 for requests ([`split`]): kube's builder offers only HTTP/1.1, so every request in
//! flight held a TLS connection of its own, and a burst opened tens of them. Offered by ALPN,
//! HTTP/2 carries every request as a stream of one connection per server (a server that does
//! not speak it gets HTTP/1.1 as before). Watches, followed logs and upgrades keep a
//! connection each, over HTTP/1.1.

use std::time::Duration;

use hyper::rt::{Read, Write};
use hyper_util::{
    client::legacy::{
        Client as HyperClient,
        connect::{Connection, HttpConnector, proxy::Tunnel},
    },
    rt::{TokioExecutor, TokioTimer},
};
use kube::{
    Client, Config,
    client::{ConfigExt, retry::RetryPolicy},
};
use tower::{BoxError, ServiceBuilder, retry::RetryLayer};

use crate::rate::{Limits, RateLimitLayer};

pub mod split;

/// How long a pooled connection may stay idle before it is closed: above the 10 s of the
/// periodic requests (the node's ping and Lease), so that their connection is reused rather than
/// made again each time; a burst's extra connections close within twice this after it. Watches
/// hold their connections.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(12);

/// How often a shared HTTP/2 connection with a request on it is pinged, and how long an answer
/// may take before the connection is closed (client-go checks its connections likewise): a
/// connection gone silent (a NAT or a node forgot it) would otherwise keep every request made
/// on it waiting, since periodic requests keep it in the pool, until the kernel gives up on it
/// (about 15 minutes); the node's Lease expires in 40 s.
pub const HTTP2_PING_EVERY: Duration = Duration::from_secs(10);
/// See [`HTTP2_PING_EVERY`].
pub const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP versions a connection offers a server over TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Http {
    /// HTTP/2 when the server agrees (ALPN `h2`, then `http/1.1`), else HTTP/1.1.
    Negotiated,
    /// HTTP/1.1 only.
    One,
}

/// A client of `config` behind `limits` ([`over`] a plain connector; TLS per the config).
pub fn client(config: Config, limits: Limits) -> Result<Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    over(config, http, &RateLimitLayer::new(limits))
}

/// The client of `config` over `http`, behind `rate` ([`build`] with [`POOL_IDLE_TIMEOUT`]),
/// through `config`'s proxy when it is an HTTP proxy without credentials (in-band peering's
/// liqo-proxy): the connection to the proxy is `http`'s. Any other proxy gets kube's own
/// builder, without the pool's timer.
pub(crate) fn over(
    config: Config,
    mut http: HttpConnector,
    rate: &RateLimitLayer,
) -> Result<Client, kube::Error> {
    // Small writes go at once (as Go's clients and servers do): HTTP/2 sends a request as
    // several small frames, and Nagle's algorithm held each behind the peer's delayed
    // acknowledgement (71 ms at the median per offloaded pod without this, 14 ms with it).
    http.set_nodelay(true);
    match config.proxy_url.clone() {
        None => build(&config, http, rate, POOL_IDLE_TIMEOUT),
        Some(proxy)
            if proxy.scheme_str() == Some("http")
                && !proxy.authority().is_some_and(|a| a.as_str().contains('@')) =>
        {
            build(&config, Tunnel::new(proxy, http), rate, POOL_IDLE_TIMEOUT)
        }
        Some(_) => Ok(kube::client::ClientBuilder::try_from(config)?
            .with_layer(rate)
            .build()),
    }
}

/// The client over `connector`, behind `rate`, with kube's layers (base URI, retry of the
/// server's 429/503 when `config` asks for it, authentication, extra headers such as the
/// User-Agent), `config`'s timeouts (its read timeout also bounds the wait for each answer's
/// head: on a shared HTTP/2 connection the connection's own read timeout no longer does), and
/// two pools whose connections close once `idle` for that long ([`split`]: streams over
/// HTTP/1.1, other requests over HTTP/2 when the server agrees, pinged while in use:
/// [`HTTP2_PING_EVERY`]); tracing and gzip are left out.
fn build<C>(
    config: &Config,
    connector: C,
    rate: &RateLimitLayer,
    idle: Duration,
) -> Result<Client, kube::Error>
where
    C: tower::Service<http::Uri> + Clone + Send + Sync + 'static,
    C::Response: Connection + Read + Write + Send + Unpin + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    let tls = config.rustls_client_config()?;
    let pool = |versions: Http| -> Result<_, kube::Error> {
        let https = https(config, tls.clone(), connector.clone(), versions)?;
        let mut timed = hyper_timeout::TimeoutConnector::new(https);
        timed.set_connect_timeout(config.connect_timeout);
        timed.set_read_timeout(config.read_timeout);
        timed.set_write_timeout(config.write_timeout);
        timed.set_reset_reader_on_write(config.reset_reader_on_write);
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(idle);
        if versions == Http::Negotiated {
            builder
                .timer(TokioTimer::new())
                .http2_keep_alive_interval(HTTP2_PING_EVERY)
                .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
                // A few stalled streams (a slow reader) do not hold back the others on the
                // shared connection, as in Go's transport; each stream's own window (2 MiB)
                // still bounds what it buffers.
                .http2_initial_connection_window_size(HTTP2_CONNECTION_WINDOW);
        }
        Ok(builder.build(timed))
    };
    let hyper = split::Split {
        streams: pool(Http::One)?,
        requests: pool(Http::Negotiated)?,
    };
    let service = ServiceBuilder::new()
        .layer(rate.clone())
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .option_layer(config.read_timeout.map(tower::timeout::TimeoutLayer::new))
        .map_err(BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace.clone()))
}

/// The flow-control window of a whole shared HTTP/2 connection, bytes: 32 streams' own.
const HTTP2_CONNECTION_WINDOW: u32 = 64 << 20;

/// `connector` under `tls` (`config`'s certificates and identity) and `config`'s server name,
/// as kube's own connector, offering `versions` by ALPN; plain HTTP for an `http` URL.
fn https<C>(
    config: &Config,
    tls: rustls::ClientConfig,
    connector: C,
    versions: Http,
) -> Result<hyper_rustls::HttpsConnector<C>, kube::Error> {
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
            })?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    Ok(match versions {
        Http::Negotiated => builder.enable_all_versions().wrap_connector(connector),
        Http::One => builder.enable_http1().wrap_connector(connector),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An HTTP/1.1 server that answers each request after 100 ms (so that requests at once
    /// take a connection each) and counts connections opened and closed by the client.
    async fn server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (opened, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (o, c) = (opened.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                o.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                                if s.write_all(answer.as_bytes()).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        (url, opened, closed)
    }

    #[tokio::test]
    async fn connections_a_burst_opened_close_once_idle() {
        let (url, opened, closed) = server().await;
        let config = Config::new(url.parse().unwrap());
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let rate = RateLimitLayer::new(Limits { qps: 0.0, burst: 0 });
        let client = build(&config, http, &rate, Duration::from_secs(1)).unwrap();
        let burst = (0..4).map(|_| {
            let client = client.clone();
            async move {
                client
                    .request_text(http::Request::get("/x").body(Vec::new()).unwrap())
                    .await
            }
        });
        for answer in futures::future::join_all(burst).await {
            assert_eq!(answer.unwrap(), "{}");
        }
        assert_eq!(
            opened.load(Ordering::SeqCst),
            4,
            "one connection per request at once"
        );
        assert_eq!(
            closed.load(Ordering::SeqCst),
            0,
            "pooled, not closed, right after"
        );
        // Closed by the pool's timer within twice the idle timeout, with no request since.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while closed.load(Ordering::SeqCst) < 4 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of 4 idle connections closed after 5 s",
                closed.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The client still works: a new connection.
        let again = client
            .request_text(http::Request::get("/x").body(Vec::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(again, "{}");
        assert_eq!(opened.load(Ordering::SeqCst), 5);
    }
}

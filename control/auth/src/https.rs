//! The HTTPS (or plain HTTP) serving loop shared by liqo-auth's service and the
//! controller-manager's admission webhooks: an axum [`Router`] behind a bounded number of
//! connections (the excess closed at once), a TLS handshake timeout, a header timeout, and
//! either one request per connection or keep-alive up to a connection age
//! ([`Limits::keep_alive`]). It owns the accept loop and the rustls configuration; it never
//! decides what a request means (the router does) nor where a certificate comes from.
//!
//! One request per connection (liqo-auth: peering requests are few) costs a TCP connection and
//! a TLS handshake each, and buys a simple bound: a slot is held for one request, and a
//! replaced certificate reaches every client at its next request. The admission webhooks keep
//! connections alive instead: the API server sends one review per pod created in an offloaded
//! namespace, and a handshake on each (both sides' CPU, on a busy API server) was a cost per
//! pod. There a connection serves requests until it is `keep_alive` old; its next answer says
//! `Connection: close`, so the client moves to a new connection between two requests, never
//! during one (and a replaced certificate reaches every client within that age). Between
//! requests it waits at most `header` for the next one, so an idle connection frees its slot;
//! that close has the race of every keep-alive server's idle timeout (a request sent as the
//! connection closes fails; the API server drops the idle connections it sees closed).

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    http::{HeaderValue, header::CONNECTION},
};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::Semaphore,
};
use tokio_rustls::TlsAcceptor;

/// The time and size limits of the connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a client may take for the TLS handshake.
    pub handshake: Duration,
    /// How long a client may take to send a request's headers.
    pub header: Duration,
    /// How long handling a request may take (the router's own timeout answers first; this one
    /// bounds the whole connection with `header`, `keep_alive` and 5 s to write the answer).
    pub request: Duration,
    /// The most connections served at once; more are closed at once.
    pub max_connections: usize,
    /// `None`: one request per connection. `Some(age)`: requests on a connection at most
    /// `header` apart; the first answered once it is `age` old says `Connection: close`.
    pub keep_alive: Option<Duration>,
}

/// The connection figures of one serving loop, for its Prometheus registry: the connections
/// open now and the ones closed at once because every slot was taken. A default one counts for
/// nobody (a loop whose figures are not exported).
#[derive(Debug, Clone, Default)]
pub struct Connections {
    /// Connections holding a slot now.
    pub open: Gauge,
    /// Connections closed at once, over `max_connections`.
    pub refused: Counter,
}

/// One slot's share of [`Connections::open`], given back when the connection ends.
struct Open(Gauge);

impl Open {
    fn new(gauge: &Gauge) -> Open {
        gauge.inc();
        Open(gauge.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A TLS acceptor serving `chain` (leaf first) with `key`, ring only.
pub fn acceptor(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<TlsAcceptor, rustls::Error> {
    let config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A serving certificate that can be replaced while serving (new connections get the new one).
#[derive(Debug)]
pub struct Replaceable(std::sync::RwLock<Arc<CertifiedKey>>);

/// The crypto provider of every configuration here: ring only.
fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

impl Replaceable {
    /// `chain` (leaf first) with `key`; refused when the key is not the leaf's.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Arc<Self>, rustls::Error> {
        let certified = CertifiedKey::from_der(chain, key, &provider())?;
        Ok(Arc::new(Replaceable(std::sync::RwLock::new(Arc::new(
            certified,
        )))))
    }

    /// Serves `chain` with `key` from now on (unchanged when they are refused).
    pub fn replace(
        &self,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<(), rustls::Error> {
        let certified = Arc::new(CertifiedKey::from_der(chain, key, &provider())?);
        // A writer panicking mid-assignment cannot leave a half-written Arc: take it anyway.
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = certified;
        Ok(())
    }
}

impl ResolvesServerCert for Replaceable {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

/// A TLS acceptor serving whatever `cert` holds at each handshake, ring only.
pub fn replaceable_acceptor(cert: Arc<Replaceable>) -> Result<TlsAcceptor, rustls::Error> {
    let config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `router` on `listener` (over TLS when `tls` is set) until `shutdown` completes;
/// connections in flight are dropped with the runtime. `name` names the service in the logs.
pub async fn serve(
    name: &str,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: Limits,
    connections: Connections,
    shutdown: impl Future<Output = ()> + Send,
) {
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        "{name} serving on {scheme}://{}",
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    );
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "{name}: accepting a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Over the limit: the connection is closed at once (dropped).
            tracing::debug!(%peer, "{name}: too many connections: closing");
            connections.refused.inc();
            continue;
        };
        let open = Open::new(&connections.open);
        let router = router.clone();
        let acceptor = tls.clone();
        tokio::spawn(async move {
            let _slot = (slot, open);
            match acceptor {
                Some(acceptor) => {
                    match tokio::time::timeout(limits.handshake, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => connection(tls, router, peer, limits).await,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        }
                        Err(_elapsed) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
                None => connection(stream, router, peer, limits).await,
            }
        });
    }
    tracing::info!("{name} stopped");
}

/// Serves a connection: one request, or requests until it is past its keep-alive age (the
/// answer to the next one then says `Connection: close`: the client opens another connection
/// for the one after, and no request is cut while it arrives), within the header and request
/// limits.
async fn connection<I>(io: I, router: Router, peer: SocketAddr, limits: Limits)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let born = tokio::time::Instant::now();
    let aged = limits.keep_alive;
    let service = TowerToHyperService::new(tower::util::MapResponse::new(
        router,
        move |mut answer: axum::response::Response| {
            if aged.is_some_and(|age| born.elapsed() >= age) {
                answer
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            answer
        },
    ));
    let serving = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        // Also the longest wait for the next request on a kept-alive connection.
        .header_read_timeout(limits.header)
        .keep_alive(limits.keep_alive.is_some())
        .serve_connection(TokioIo::new(io), service);
    // The request's own timeout answers first; this one bounds the last answer's writing.
    let bound = limits.keep_alive.unwrap_or_default()
        + limits.header
        + limits.request
        + Duration::from_secs(5);
    match tokio::time::timeout(bound, serving).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.is_timeout() => {
            tracing::debug!(%peer, "no request within the header timeout: closed");
        }
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "connection ended with an error"),
        Err(_elapsed) => tracing::debug!(%peer, "connection timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::PrivatePkcs8KeyDer;

    fn pair(name: &str) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let c = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.signing_key.serialize_der()));
        (vec![c.cert.der().clone()], key)
    }

    fn served(r: &Replaceable) -> CertificateDer<'static> {
        r.0.read().unwrap().cert[0].clone()
    }

    /// The header timeout of [`plain`]: also how long a kept-alive connection may idle.
    const IDLE: Duration = Duration::from_millis(800);

    /// Serves a router answering `ok` on plain HTTP with `keep_alive`; its address.
    async fn plain(keep_alive: Option<Duration>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/", axum::routing::post(|| async { "ok" }));
        let limits = Limits {
            handshake: Duration::from_secs(1),
            header: IDLE,
            request: Duration::from_secs(1),
            max_connections: 4,
            keep_alive,
        };
        tokio::spawn(serve(
            "test",
            listener,
            None,
            router,
            limits,
            Connections::default(),
            std::future::pending(),
        ));
        addr
    }

    const REQUEST: &[u8] = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n";

    /// Sends [`REQUEST`] on `conn`; the whole answer (it ends with `ok`), lower-cased.
    async fn ask(conn: &mut tokio::net::TcpStream) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        conn.write_all(REQUEST)
            .await
            .expect("the request is written");
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.ends_with(b"ok") {
            let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
                .await
                .expect("an answer within 5 s")
                .expect("the connection reads");
            assert!(
                n > 0,
                "closed before answering: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        let got = String::from_utf8_lossy(&got).to_lowercase();
        assert!(got.starts_with("http/1.1 200"), "{got}");
        got
    }

    /// Whether the server closed `conn` (a read gives nothing within 3 s).
    async fn closed(conn: &mut tokio::net::TcpStream) -> bool {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 16];
        matches!(
            tokio::time::timeout(Duration::from_secs(3), conn.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn one_request_per_connection_without_keep_alive() {
        let addr = plain(None).await;
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        ask(&mut conn).await;
        assert!(closed(&mut conn).await, "closed after its one request");
    }

    #[tokio::test]
    async fn kept_alive_requests_share_a_connection_until_idle_or_old() {
        let age = Duration::from_secs(1);
        let addr = plain(Some(age)).await;
        // Several requests on one connection.
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        for _ in 0..3 {
            let got = ask(&mut conn).await;
            assert!(!got.contains("connection: close"), "{got}");
        }
        // Idle longer than the header timeout: closed, its slot free.
        assert!(closed(&mut conn).await, "an idle connection is closed");
        // Busy past its age: every request is answered; the first answer after its age says
        // so, and the connection ends after it.
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let start = std::time::Instant::now();
        let mut answered = 0;
        loop {
            let got = ask(&mut conn).await;
            answered += 1;
            if got.contains("connection: close") {
                break;
            }
            assert!(
                start.elapsed() < age * 3,
                "no close after {:?}",
                start.elapsed()
            );
            tokio::time::sleep(IDLE / 8).await;
        }
        assert!(start.elapsed() >= age, "closed at {:?}", start.elapsed());
        assert!(answered >= 3, "{answered} answers on one connection");
        assert!(closed(&mut conn).await, "closed after saying so");
    }

    #[test]
    fn a_replaceable_certificate_is_replaced_only_by_a_matching_key() {
        let (a, ka) = pair("a.example");
        let r = Replaceable::new(a.clone(), ka).unwrap();
        assert!(replaceable_acceptor(r.clone()).is_ok());
        assert_eq!(served(&r), a[0]);
        let (b, kb) = pair("b.example");
        let (_, other) = pair("c.example");
        assert!(r.replace(b.clone(), other).is_err());
        assert_eq!(served(&r), a[0], "unchanged when refused");
        r.replace(b.clone(), kb).unwrap();
        assert_eq!(served(&r), b[0]);
    }
}

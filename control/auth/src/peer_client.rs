//! The clients of a peer's API server ([`PeerClient`]): every one with connect and read
//! timeouts, so that a peer that accepts and never answers holds nothing forever, and with TCP
//! keepalive, so that a connection a NAT on the way forgot (a gateway failover moves the egress
//! to another node) is found dead in seconds, not at the end of a silent watch. Shared by the
//! controller-manager's identity manager and the virtual kubelet.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use kube::{Client, Config};

use crate::rate::{Limits, RateLimitLayer};

/// How long connecting to a peer's API server may take.
pub const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer's API server may take to answer a request (a peer that accepts and never
/// answers must not hold a reconcile forever).
pub const PEER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a watch of a peer's API server may stay silent: above the 290 s a watch request
/// asks the server for (`timeoutSeconds`, kube-runtime's default), after which the server ends
/// it. The watcher has no timeout of its own over the initial list or the wait for a watch's
/// response: without this, a peer that accepts and never answers holds a remote watch forever.
pub const PEER_WATCH_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a connection to a peer's API server may stay idle before the kernel probes it, then
/// how far apart the probes go and how many may go unanswered: a connection whose NAT entry is
/// gone (or whose peer vanished) is closed within about 11 s, and a watch on it starts again
/// (with 10 s and 5 s a lab failover still held a new offloaded pod for 34 s).
pub const PEER_KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// See [`PEER_KEEPALIVE_IDLE`].
pub const PEER_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// See [`PEER_KEEPALIVE_IDLE`].
pub const PEER_KEEPALIVE_PROBES: u32 = 3;
/// How long data sent to a peer's API server may stay unacknowledged, and how long a connection
/// may go without hearing from it, before it is closed (`TCP_USER_TIMEOUT`). Linux lets it
/// override keepalive's give-up rule (tcp(7)), so it equals keepalive's own give-up time
/// (idle, then every probe): a dead connection closes at about 11 s whether it was idle or had
/// data in flight. A live peer acknowledges within a round trip however busy its API server
/// is, and answers zero-window probes while a stream's reader is slow (since Linux 5.11 only
/// unanswered probes count).
pub const PEER_TCP_USER_TIMEOUT: Duration = PEER_KEEPALIVE_IDLE
    .saturating_add(PEER_KEEPALIVE_INTERVAL.saturating_mul(PEER_KEEPALIVE_PROBES));

/// The clients of one peer's API server.
#[derive(Clone)]
pub struct PeerClient {
    /// For requests: connect and read timeouts ([`PEER_CONNECT_TIMEOUT`],
    /// [`PEER_READ_TIMEOUT`]).
    pub api: Client,
    /// For watches: the connect timeout and a read timeout above the server's watch timeout
    /// ([`PEER_WATCH_READ_TIMEOUT`]: a watch may rightly stay silent until the server ends it).
    pub watch: Client,
}

impl PeerClient {
    /// Both clients of a peer's API server from its config, with [`PEER_CONNECT_TIMEOUT`] and
    /// [`PEER_READ_TIMEOUT`], sharing the rate `limits` (one bucket for the server).
    pub fn from_config(config: Config, limits: Limits) -> Result<PeerClient, kube::Error> {
        let (api, watch) = peer_configs(config, PEER_CONNECT_TIMEOUT, PEER_READ_TIMEOUT);
        let rate = RateLimitLayer::new(limits);
        Ok(PeerClient {
            api: limited(api, &rate)?,
            watch: limited(watch, &rate)?,
        })
    }
}

/// A client of a peer's API server from `config` (its timeouts included) whose connections
/// carry TCP keepalive ([`PEER_KEEPALIVE_IDLE`]) and a user timeout ([`PEER_TCP_USER_TIMEOUT`]):
/// kube's own builder sets neither. Through an HTTP proxy without credentials (in-band
/// peering's liqo-proxy, reached across the tunnel) the connection to the proxy carries them.
/// Any other proxy gets kube's own client, without them.
pub fn client(config: Config) -> Result<Client, kube::Error> {
    limited(config, &RateLimitLayer::new(Limits { qps: 0.0, burst: 0 }))
}

/// [`client`] behind `rate`.
fn limited(config: Config, rate: &RateLimitLayer) -> Result<Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_keepalive(Some(PEER_KEEPALIVE_IDLE));
    http.set_keepalive_interval(Some(PEER_KEEPALIVE_INTERVAL));
    http.set_keepalive_retries(Some(PEER_KEEPALIVE_PROBES));
    http.set_tcp_user_timeout(Some(PEER_TCP_USER_TIMEOUT));
    crate::stack::over(config, http, rate)
}

/// The configs of [`PeerClient`]: for requests (`read`) and for watches
/// ([`PEER_WATCH_READ_TIMEOUT`]).
pub fn peer_configs(config: Config, connect: Duration, read: Duration) -> (Config, Config) {
    let mut watch = config;
    watch.connect_timeout = Some(connect);
    // A read timeout counts from the request, not from when a pooled connection idled.
    watch.reset_reader_on_write = true;
    let mut api = watch.clone();
    api.read_timeout = Some(read);
    watch.read_timeout = Some(PEER_WATCH_READ_TIMEOUT);
    (api, watch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;
    use kube::Api;

    /// A peer that accepts connections, holds them, reads nothing and answers nothing.
    async fn silent_peer() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        (addr, hold)
    }

    #[tokio::test]
    async fn a_peer_that_accepts_and_never_answers_fails_a_request_in_the_read_timeout() {
        // Accepts, reads nothing, answers nothing.
        let (addr, hold) = silent_peer().await;
        let config = Config::new(format!("http://{addr}").parse().unwrap());
        let (api, watch) = peer_configs(config, PEER_CONNECT_TIMEOUT, PEER_READ_TIMEOUT);
        assert_eq!(api.connect_timeout, Some(PEER_CONNECT_TIMEOUT));
        assert_eq!(api.read_timeout, Some(PEER_READ_TIMEOUT));
        assert!(api.reset_reader_on_write);
        assert_eq!(watch.connect_timeout, Some(PEER_CONNECT_TIMEOUT));
        assert_eq!(watch.read_timeout, Some(PEER_WATCH_READ_TIMEOUT));
        assert!(watch.reset_reader_on_write);
        // Above the 290 s the watcher asks the server to end a watch after.
        assert!(PEER_WATCH_READ_TIMEOUT > Duration::from_secs(290));
        // The same with a short read timeout, against the silent peer.
        let (api, _) = peer_configs(api, Duration::from_secs(1), Duration::from_secs(1));
        let client = client(api).unwrap();
        let t = std::time::Instant::now();
        let got = tokio::time::timeout(
            Duration::from_secs(10),
            Api::<Secret>::namespaced(client, "x").get_opt("y"),
        )
        .await
        .expect("the request ends on its own");
        assert!(got.is_err(), "{got:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        hold.abort();
    }

    #[tokio::test]
    async fn a_peer_connection_carries_keepalive_and_a_user_timeout() {
        // Accepts and holds the connection, answers nothing: the request stays open.
        let (addr, hold) = silent_peer().await;
        let config = Config::new(format!("http://{addr}").parse().unwrap());
        let (api, _) = peer_configs(config, PEER_CONNECT_TIMEOUT, Duration::from_secs(20));
        let c = client(api).unwrap();
        let request =
            tokio::spawn(async move { Api::<Secret>::namespaced(c, "x").get_opt("y").await });
        // The kernel's view of our end of the connection: its keepalive timer runs.
        let mut seen = String::new();
        for _ in 0..50 {
            let out = std::process::Command::new("ss")
                .args(["-tno", "state", "established", "dst"])
                .arg(addr.to_string())
                .output()
                .expect("ss runs");
            assert!(out.status.success(), "ss: {out:?}");
            seen = String::from_utf8_lossy(&out.stdout).into_owned();
            if seen.contains("timer:(keepalive") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            seen.contains("timer:(keepalive"),
            "no keepalive timer:\n{seen}"
        );
        request.abort();
        hold.abort();
    }
}

//! The clients of a peer's API server ([`PeerClient`]): every one with connect and read
//! timeouts, so that a peer that accepts and never answers holds nothing forever. Shared by the
//! controller-manager's identity manager and the virtual kubelet.

use std::time::Duration;

use kube::{Client, Config};

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
    /// [`PEER_READ_TIMEOUT`].
    pub fn from_config(config: Config) -> Result<PeerClient, kube::Error> {
        let (api, watch) = peer_configs(config, PEER_CONNECT_TIMEOUT, PEER_READ_TIMEOUT);
        Ok(PeerClient {
            api: Client::try_from(api)?,
            watch: Client::try_from(watch)?,
        })
    }
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

    #[tokio::test]
    async fn a_peer_that_accepts_and_never_answers_fails_a_request_in_the_read_timeout() {
        // Accepts, reads nothing, answers nothing.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
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
        let client = Client::try_from(api).unwrap();
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
}

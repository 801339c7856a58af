//! How the auth service runs: its [`Config`] (listen address, namespace, the apiserver the
//! identity reply names, TLS, limits and timeouts, metrics).

use std::{net::SocketAddr, time::Duration};

use crate::metrics::Metrics;

/// How the service runs.
#[derive(Clone)]
pub struct Config {
    /// Where it listens (port 0: any free port, see
    /// [`Server::local_addr`](super::Server::local_addr)).
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
    /// How often the local token Secret is checked (and recreated when deleted); the token in
    /// memory follows it.
    pub token_check_period: Duration,
    /// How long a client may take for the TLS handshake.
    pub handshake_timeout: Duration,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// How long handling a request may take, from its headers to the answer (reading the body
    /// included).
    pub request_timeout: Duration,
    /// The most connections served at once; more are closed at once.
    pub max_connections: usize,
    /// The largest request body (bytes); a larger one is answered 413.
    pub max_body: usize,
    /// Where requests are counted.
    pub metrics: Metrics,
}

impl Config {
    /// A configuration with the defaults: HTTPS, 30 s for the signer, the token checked every 5 s,
    /// 10 s for the TLS handshake and for the headers, 45 s for a request, 256 connections,
    /// bodies up to 64 KiB.
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
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(45),
            max_connections: 256,
            max_body: 64 * 1024,
            metrics: Metrics::default(),
        }
    }
}

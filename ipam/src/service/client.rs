//! Connecting to the service: the one place the CLI, the lab and the controllers build their
//! connection (https with a CA, a client certificate, a bearer token), so they all speak to a
//! secured server the same way.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use tonic::{
    service::interceptor::InterceptedService,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

use super::{
    auth::{BearerToken, Token, TokenError},
    proto::ipam_client::IpamClient,
};

/// The default address of the service.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:6000";
/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call may wait for its answer: past it, the call fails (code `Cancelled`, its
/// source a [`tonic::TimeoutExpired`]). A server that takes a call and never answers (wedged, or
/// its host gone without a reset) no longer holds the CLI, the gateway operator or a test
/// forever. It is longer than one of the server's store requests
/// ([`crate::store::configmap::REQUEST_TIMEOUT`]), so a slow store usually answers with its
/// own error first, but it bounds nothing on the server: a
/// save may chain several requests or wait behind another call's, and goes on after the client
/// gave up (the server is not told: no `grpc-timeout`), so a change may land after a timeout.
/// Callers with their own figure set it on the endpoint (the manager, the virtual kubelet).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(75);

/// Whether `status` is this client's own call timeout ([`CALL_TIMEOUT`]), not an answer.
pub fn timed_out(status: &tonic::Status) -> bool {
    // tonic's transport error carries it, one or more levels down.
    let mut cause = std::error::Error::source(status);
    while let Some(e) = cause {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// A connected client; every call carries the token, if one was given.
pub type Client = IpamClient<InterceptedService<Channel, BearerToken>>;

/// How to reach the service (the flags `--server`, `--ca-file`, `--token-file`,
/// `--client-cert-file`, `--client-key-file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// `http://host:port` or `https://host:port`.
    pub server: String,
    /// The CA that signed the server's certificate (https; else the system's roots).
    pub ca_file: Option<PathBuf>,
    /// A file holding the bearer token.
    pub token_file: Option<PathBuf>,
    /// The client certificate (mutual TLS).
    pub client_cert_file: Option<PathBuf>,
    /// Its private key.
    pub client_key_file: Option<PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions::new(DEFAULT_SERVER)
    }
}

/// Why the client could not connect.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address is not a URL the client can use.
    #[error("--server {server:?} is not an http:// or https:// URL")]
    BadServer {
        /// The address given.
        server: String,
    },
    /// TLS options with a clear-text server.
    #[error("--{flag} needs an https:// server (got {server})")]
    TlsOptionWithoutHttps {
        /// The TLS flag given.
        flag: &'static str,
        /// The address given.
        server: String,
    },
    /// A token would cross the network in clear text.
    #[error(
        "refusing to send the token in clear text to {server}: use https:// (with --ca-file) for \
         a server that is not on loopback"
    )]
    TokenInClear {
        /// The address given.
        server: String,
    },
    /// Half of the client identity.
    #[error("--{given} needs --{missing}")]
    Incomplete {
        /// The flag given.
        given: &'static str,
        /// The flag missing.
        missing: &'static str,
    },
    /// A PEM file could not be read.
    #[error("reading --{flag} {}", path.display())]
    Read {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The token file cannot be used.
    #[error("--token-file")]
    Token(#[source] TokenError),
    /// The TLS configuration was refused.
    #[error("configuring TLS for {server}")]
    Tls {
        /// The address.
        server: String,
        /// The cause.
        #[source]
        source: tonic::transport::Error,
    },
    /// The server could not be reached.
    #[error("connecting to {server}")]
    Connect {
        /// The address.
        server: String,
        /// The cause.
        #[source]
        source: tonic::transport::Error,
    },
}

/// What [`ClientOptions::plan`] decided, before any file is read.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    https: bool,
    identity: Option<(PathBuf, PathBuf)>,
}

impl ClientOptions {
    /// Options for `server` with no TLS files and no token.
    pub fn new(server: impl Into<String>) -> Self {
        ClientOptions {
            server: server.into(),
            ca_file: None,
            token_file: None,
            client_cert_file: None,
            client_key_file: None,
        }
    }

    /// Checks the combination without reading a file.
    fn plan(&self) -> Result<Plan, ClientError> {
        let bad = || ClientError::BadServer {
            server: self.server.clone(),
        };
        let uri: tonic::transport::Uri = self.server.parse().map_err(|_| bad())?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad()),
        };
        let host = uri.host().ok_or_else(bad)?;
        let identity = match (&self.client_cert_file, &self.client_key_file) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (Some(_), None) => {
                return Err(ClientError::Incomplete {
                    given: "client-cert-file",
                    missing: "client-key-file",
                });
            }
            (None, Some(_)) => {
                return Err(ClientError::Incomplete {
                    given: "client-key-file",
                    missing: "client-cert-file",
                });
            }
            (None, None) => None,
        };
        if !https {
            let flag = if self.ca_file.is_some() {
                Some("ca-file")
            } else if identity.is_some() {
                Some("client-cert-file")
            } else {
                None
            };
            if let Some(flag) = flag {
                return Err(ClientError::TlsOptionWithoutHttps {
                    flag,
                    server: self.server.clone(),
                });
            }
            if self.token_file.is_some() && !is_loopback(host) {
                return Err(ClientError::TokenInClear {
                    server: self.server.clone(),
                });
            }
        }
        Ok(Plan { https, identity })
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|source| ClientError::Read {
        flag,
        path: path.to_owned(),
        source,
    })
}

/// A connection's parts, ready to dial: the endpoint (address, TLS) and the token every call
/// carries. [`connect`] dials it over TCP; a caller with its own transport (say, a socket
/// opened inside a network namespace) passes its connector to
/// [`Endpoint::connect_with_connector`] and wraps the channel with [`Prepared::client`].
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The endpoint, TLS configured when the URL is https.
    pub endpoint: Endpoint,
    token: BearerToken,
}

impl Prepared {
    /// The client over `channel` (dialled from [`Prepared::endpoint`]).
    pub fn client(self, channel: Channel) -> Client {
        IpamClient::with_interceptor(channel, self.token)
    }
}

impl ClientOptions {
    /// Checks the options and reads their files: https when the URL is https (trusting
    /// `ca_file`, else the system's roots; presenting the client certificate if given), the
    /// bearer token on every call if given.
    pub fn prepare(&self) -> Result<Prepared, ClientError> {
        let plan = self.plan()?;
        let server = || self.server.clone();
        let token = self
            .token_file
            .as_deref()
            .map(Token::from_file)
            .transpose()
            .map_err(ClientError::Token)?;
        let mut endpoint = Endpoint::from_shared(self.server.clone())
            .map_err(|_| ClientError::BadServer { server: server() })?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT);
        if plan.https {
            let mut tls = ClientTlsConfig::new();
            tls = match &self.ca_file {
                Some(ca) => tls.ca_certificate(Certificate::from_pem(read("ca-file", ca)?)),
                None => tls.with_native_roots(),
            };
            if let Some((cert, key)) = &plan.identity {
                tls = tls.identity(Identity::from_pem(
                    read("client-cert-file", cert)?,
                    read("client-key-file", key)?,
                ));
            }
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|source| ClientError::Tls {
                    server: server(),
                    source,
                })?;
        }
        Ok(Prepared {
            endpoint,
            token: BearerToken(token),
        })
    }
}

/// Connects to the service as `options` say (see [`ClientOptions::prepare`]), each call
/// bounded by [`CALL_TIMEOUT`].
pub async fn connect(options: &ClientOptions) -> Result<Client, ClientError> {
    connect_within(options, CALL_TIMEOUT).await
}

/// [`connect`] with each call bounded by `call_timeout` instead.
pub async fn connect_within(
    options: &ClientOptions,
    call_timeout: Duration,
) -> Result<Client, ClientError> {
    let prepared = options.prepare()?;
    let channel = prepared
        .endpoint
        .clone()
        .timeout(call_timeout)
        .connect()
        .await
        .map_err(|source| ClientError::Connect {
            server: options.server.clone(),
            source,
        })?;
    Ok(prepared.client(channel))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that takes the connection and the call and never answers: the call fails at
    /// its timeout, as cancelled, instead of waiting forever.
    #[tokio::test]
    async fn a_call_to_a_server_that_never_answers_fails_at_its_timeout() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Reads whatever comes (the HTTP/2 preface, the call) and writes nothing.
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            while s.read(&mut buf).await.is_ok_and(|n| n > 0) {}
        });
        let opts = ClientOptions::new(format!("http://{addr}"));
        let t = std::time::Instant::now();
        let mut c = connect_within(&opts, Duration::from_millis(500))
            .await
            .unwrap();
        let status = tokio::time::timeout(
            Duration::from_secs(10),
            c.list(crate::service::proto::Empty {}),
        )
        .await
        .expect("the call is still waiting after 10 s")
        .unwrap_err();
        let took = t.elapsed();
        assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
        assert!(
            timed_out(&status),
            "the CLI's message keys on it: {status:?}"
        );
        assert!(!timed_out(&tonic::Status::cancelled("Timeout expired")));
        assert!(took >= Duration::from_millis(450), "{took:?}");
        server.abort();
    }

    fn opts(server: &str, ca: bool, token: bool, cert: bool, key: bool) -> ClientOptions {
        let p = |on: bool, s: &str| on.then(|| PathBuf::from(s));
        ClientOptions {
            server: server.into(),
            ca_file: p(ca, "ca.pem"),
            token_file: p(token, "token"),
            client_cert_file: p(cert, "c.pem"),
            client_key_file: p(key, "k.pem"),
        }
    }

    #[test]
    fn plans_https_only_for_https_urls() {
        let p = opts("https://ipam.liqo.svc:6000", true, true, true, true)
            .plan()
            .unwrap();
        assert!(p.https);
        assert_eq!(
            p.identity,
            Some((PathBuf::from("c.pem"), PathBuf::from("k.pem")))
        );
        let p = opts("http://127.0.0.1:6000", false, true, false, false)
            .plan()
            .unwrap();
        assert!(!p.https);
        assert_eq!(p.identity, None);
        assert!(ClientOptions::default().plan().is_ok());
    }

    #[test]
    fn refuses_what_would_not_be_secure_or_cannot_work() {
        for (o, want) in [
            (
                opts("http://10.0.0.1:6000", false, true, false, false),
                "refusing to send the token in clear text",
            ),
            (
                opts("http://127.0.0.1:6000", true, false, false, false),
                "--ca-file needs an https:// server",
            ),
            (
                opts("http://localhost:6000", false, false, true, true),
                "--client-cert-file needs an https:// server",
            ),
            (
                opts("https://h:1", false, false, true, false),
                "--client-cert-file needs --client-key-file",
            ),
            (
                opts("https://h:1", false, false, false, true),
                "--client-key-file needs --client-cert-file",
            ),
            (
                opts("ftp://h:1", false, false, false, false),
                "is not an http",
            ),
            (
                opts("127.0.0.1:6000", false, false, false, false),
                "is not an http",
            ),
        ] {
            let e = o.plan().unwrap_err().to_string();
            assert!(e.contains(want), "{o:?}: {e}");
        }
        for host in ["http://localhost:1", "http://127.0.0.2:1", "http://[::1]:1"] {
            assert!(
                opts(host, false, true, false, false).plan().is_ok(),
                "{host}"
            );
        }
    }
}

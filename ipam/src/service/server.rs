//! Serving the gRPC API: where it listens, TLS, who may call it, and a clean stop.
//!
//! A listener that other hosts can reach must use TLS and authenticate its callers; loopback may
//! go without. [`Security::check`] decides that without touching a file, [`Server::bind`] reads
//! the files (or the Secret of `--tls-secret`, [`super::tls_secret`]) and binds, [`Server::run`]
//! serves until the shutdown future resolves.

use std::{
    future::Future,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tokio::sync::Notify;
use tonic::transport::{Certificate, Identity, ServerTlsConfig, server::TcpIncoming};

use super::{
    Service,
    auth::{Authenticator, Token, TokenError},
    tls_secret::{self, TlsSecret, TlsSecretError},
};

/// How long calls in flight may take to finish after the shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long a client may take to finish the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The security options of the server (the flags `--tls-cert-file`, `--tls-key-file`,
/// `--token-file`, `--client-ca-file`: PEM files; or `--tls-secret` for the first three).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// The server's certificate chain.
    pub tls_cert_file: Option<PathBuf>,
    /// The server's private key.
    pub tls_key_file: Option<PathBuf>,
    /// A file holding the bearer token callers must present.
    pub token_file: Option<PathBuf>,
    /// The CA that signs the client certificates callers must present (mutual TLS).
    pub client_ca_file: Option<PathBuf>,
    /// The Secret holding (or to hold) the certificate, its key and the token, instead of the
    /// files.
    pub tls_secret: Option<TlsSecret>,
}

/// A combination of options the server refuses.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// Other hosts could reach the API in clear text.
    #[error(
        "refusing to serve on {listen} without TLS: it is not a loopback address; add \
         --tls-cert-file and --tls-key-file (and --token-file or --client-ca-file), or \
         --tls-secret, or listen on 127.0.0.1"
    )]
    ExposedWithoutTls {
        /// The listen address.
        listen: SocketAddr,
    },
    /// Other hosts could call the API without credentials.
    #[error(
        "refusing to serve on {listen} without authenticating callers: it is not a loopback \
         address; add --token-file or --client-ca-file"
    )]
    ExposedWithoutAuth {
        /// The listen address.
        listen: SocketAddr,
    },
    /// Half of the TLS identity.
    #[error("--{given} needs --{missing}")]
    Incomplete {
        /// The flag given.
        given: &'static str,
        /// The flag missing.
        missing: &'static str,
    },
    /// Client certificates without TLS.
    #[error("--client-ca-file needs --tls-secret, or --tls-cert-file and --tls-key-file")]
    ClientCaWithoutTls,
    /// The Secret and a file of what it holds.
    #[error(
        "--tls-secret cannot be used with --{flag}: liqo-ipam makes and keeps the certificate, \
         its key and the token in the Secret itself"
    )]
    SecretWithFiles {
        /// The file's flag.
        flag: &'static str,
    },
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The options are refused.
    #[error(transparent)]
    Security(#[from] SecurityError),
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
    /// The TLS configuration was refused (a bad certificate or key).
    #[error("configuring TLS with {what}")]
    Tls {
        /// Where the certificate and key came from.
        what: String,
        /// The cause.
        #[source]
        source: tonic::transport::Error,
    },
    /// The Secret of `--tls-secret` could not give a certificate and a token.
    #[error(transparent)]
    TlsSecret(#[from] TlsSecretError),
    /// The address could not be bound.
    #[error("listening on {listen}")]
    Bind {
        /// The address.
        listen: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server failed while serving.
    #[error("serving gRPC on {listen}")]
    Serve {
        /// The address.
        listen: SocketAddr,
        /// The cause.
        #[source]
        source: tonic::transport::Error,
    },
}

impl Security {
    /// Checks the combination for a server on `listen`: the Secret replaces the certificate,
    /// key and token files, TLS needs both files (or the Secret), client certificates need TLS,
    /// and an address other hosts can reach (anything but loopback, `0.0.0.0` included) needs
    /// TLS and a way to authenticate callers (the Secret's token is one).
    pub fn check(&self, listen: SocketAddr) -> Result<(), SecurityError> {
        if self.tls_secret.is_some() {
            for (given, flag) in [
                (self.tls_cert_file.is_some(), "tls-cert-file"),
                (self.tls_key_file.is_some(), "tls-key-file"),
                (self.token_file.is_some(), "token-file"),
            ] {
                if given {
                    return Err(SecurityError::SecretWithFiles { flag });
                }
            }
            return Ok(());
        }
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(_), None) => {
                return Err(SecurityError::Incomplete {
                    given: "tls-cert-file",
                    missing: "tls-key-file",
                });
            }
            (None, Some(_)) => {
                return Err(SecurityError::Incomplete {
                    given: "tls-key-file",
                    missing: "tls-cert-file",
                });
            }
            _ => {}
        }
        let tls = self.tls_cert_file.is_some();
        if self.client_ca_file.is_some() && !tls {
            return Err(SecurityError::ClientCaWithoutTls);
        }
        if !listen.ip().is_loopback() {
            if !tls {
                return Err(SecurityError::ExposedWithoutTls { listen });
            }
            if self.token_file.is_none() && self.client_ca_file.is_none() {
                return Err(SecurityError::ExposedWithoutAuth { listen });
            }
        }
        Ok(())
    }

    /// The TLS configuration of the files, if TLS is on.
    fn tls(&self) -> Result<Option<ServerTlsConfig>, ServeError> {
        let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) else {
            return Ok(None);
        };
        warn_if_exposed(key, "tls-key-file");
        let identity = Identity::from_pem(read("tls-cert-file", cert)?, read("tls-key-file", key)?);
        self.tls_with(identity).map(Some)
    }

    /// The TLS configuration serving `identity` (and asking for client certificates with
    /// `--client-ca-file`).
    fn tls_with(&self, identity: Identity) -> Result<ServerTlsConfig, ServeError> {
        let mut tls = ServerTlsConfig::new()
            .identity(identity)
            .timeout(TLS_HANDSHAKE_TIMEOUT);
        if let Some(ca) = &self.client_ca_file {
            // Optional at the TLS layer so that a caller without a certificate gets
            // `Unauthenticated` from the authenticator rather than a broken handshake; a
            // certificate that is given must still verify against this CA.
            tls = tls
                .client_ca_root(Certificate::from_pem(read("client-ca-file", ca)?))
                .client_auth_optional(true);
        }
        Ok(tls)
    }
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::Read {
        flag,
        path: path.to_owned(),
        source,
    })
}

/// Warns when a private file is readable by group or others.
fn warn_if_exposed(path: &Path, flag: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "--{flag} is readable by group or others; make it 0600 or 0400");
        }
    }
}

/// A bound, configured gRPC server, not yet serving.
pub struct Server {
    listen: SocketAddr,
    incoming: TcpIncoming,
    /// The TLS configuration, and where its certificate came from (for errors).
    tls: Option<(ServerTlsConfig, String)>,
    token: Option<Token>,
    client_cert: bool,
}

impl Server {
    /// Checks `security` for `listen`, reads its files (or makes or reuses its Secret's
    /// certificate and token: the in-cluster config or `KUBECONFIG` reaches the API server) and
    /// binds the address.
    pub async fn bind(listen: SocketAddr, security: &Security) -> Result<Server, ServeError> {
        security.check(listen)?;
        let (tls, token) = match &security.tls_secret {
            Some(secret) => {
                let served = tls_secret::ensure_default(secret).await?;
                let tls = security.tls_with(served.identity())?;
                let what = format!("the certificate of Secret {secret} (--tls-secret)");
                (Some((tls, what)), Some(served.token))
            }
            None => {
                let what = "--tls-cert-file and --tls-key-file".to_owned();
                let tls = security.tls()?.map(|t| (t, what));
                let token = security
                    .token_file
                    .as_deref()
                    .map(Token::from_file)
                    .transpose()
                    .map_err(ServeError::Token)?;
                (tls, token)
            }
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| ServeError::Bind { listen, source })?;
        let listen = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { listen, source })?;
        Ok(Server {
            listen,
            incoming: TcpIncoming::from(listener),
            tls,
            token,
            client_cert: security.client_ca_file.is_some(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listen
    }

    /// Whether the server speaks TLS.
    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves until `shutdown` resolves, then stops accepting and lets the calls in flight
    /// finish (at most [`SHUTDOWN_GRACE`]; every finished change is already saved, and one cut
    /// short was either saved whole or not at all).
    pub async fn run(
        self,
        service: &Service,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError> {
        let listen = self.listen;
        let auth = Authenticator::new(self.token, self.client_cert, service.metrics());
        let mut builder = tonic::transport::Server::builder();
        if let Some((tls, what)) = self.tls {
            builder = builder
                .tls_config(tls)
                .map_err(|source| ServeError::Tls { what, source })?;
        }
        let stopping = Arc::new(Notify::new());
        let signal = {
            let stopping = Arc::clone(&stopping);
            async move {
                shutdown.await;
                stopping.notify_one();
            }
        };
        let serve = builder
            .add_service(service.grpc_with(auth))
            .serve_with_incoming_shutdown(self.incoming, signal);
        tokio::pin!(serve);
        let done = tokio::select! {
            r = &mut serve => Some(r),
            () = stopping.notified() => None,
        };
        let result = match done {
            Some(r) => r,
            None => match tokio::time::timeout(SHUTDOWN_GRACE, serve).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(
                        grace = ?SHUTDOWN_GRACE,
                        "calls still open after the shutdown grace; stopping anyway"
                    );
                    Ok(())
                }
            },
        };
        result.map_err(|source| ServeError::Serve { listen, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(cert: bool, key: bool, token: bool, ca: bool) -> Security {
        let p = |on: bool, s: &str| on.then(|| PathBuf::from(s));
        Security {
            tls_cert_file: p(cert, "c.pem"),
            tls_key_file: p(key, "k.pem"),
            token_file: p(token, "token"),
            client_ca_file: p(ca, "ca.pem"),
            tls_secret: None,
        }
    }

    fn with_secret(mut s: Security) -> Security {
        s.tls_secret = Some(TlsSecret {
            namespace: "liqo".into(),
            name: "liqo-ipam-tls".into(),
            extra_names: vec![],
        });
        s
    }

    #[test]
    fn the_secret_is_tls_and_a_token_and_replaces_their_files() {
        for listen in ["127.0.0.1:6000", "0.0.0.0:6000", "10.0.0.1:6000"] {
            let listen = listen.parse().unwrap();
            assert_eq!(
                with_secret(sec(false, false, false, false)).check(listen),
                Ok(())
            );
            // With client certificates too.
            assert_eq!(
                with_secret(sec(false, false, false, true)).check(listen),
                Ok(())
            );
            for (s, flag) in [
                (sec(true, true, false, false), "tls-cert-file"),
                (sec(false, true, false, false), "tls-key-file"),
                (sec(false, false, true, false), "token-file"),
            ] {
                let e = with_secret(s).check(listen).unwrap_err();
                assert_eq!(e, SecurityError::SecretWithFiles { flag });
                assert!(
                    e.to_string()
                        .starts_with(&format!("--tls-secret cannot be used with --{flag}")),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn loopback_may_go_without_tls_or_auth() {
        for listen in ["127.0.0.1:6000", "127.3.2.1:1", "[::1]:6000"] {
            let listen = listen.parse().unwrap();
            assert_eq!(sec(false, false, false, false).check(listen), Ok(()));
            assert_eq!(sec(false, false, true, false).check(listen), Ok(()));
            assert_eq!(sec(true, true, false, false).check(listen), Ok(()));
        }
    }

    #[test]
    fn other_addresses_need_tls_and_auth() {
        for listen in [
            "0.0.0.0:6000",
            "[::]:6000",
            "10.0.0.1:6000",
            "192.168.1.2:1",
        ] {
            let listen: SocketAddr = listen.parse().unwrap();
            let e = sec(false, false, false, false).check(listen).unwrap_err();
            assert_eq!(e, SecurityError::ExposedWithoutTls { listen });
            assert!(e.to_string().contains("--tls-cert-file"), "{e}");
            assert_eq!(
                sec(false, false, true, false).check(listen),
                Err(SecurityError::ExposedWithoutTls { listen })
            );
            let e = sec(true, true, false, false).check(listen).unwrap_err();
            assert_eq!(e, SecurityError::ExposedWithoutAuth { listen });
            assert!(
                e.to_string().contains("--token-file or --client-ca-file"),
                "{e}"
            );
            assert_eq!(sec(true, true, true, false).check(listen), Ok(()));
            assert_eq!(sec(true, true, false, true).check(listen), Ok(()));
            assert_eq!(sec(true, true, true, true).check(listen), Ok(()));
        }
    }

    #[test]
    fn incomplete_tls_is_refused_naming_the_missing_flag() {
        let listen = "127.0.0.1:6000".parse().unwrap();
        assert_eq!(
            sec(true, false, false, false)
                .check(listen)
                .unwrap_err()
                .to_string(),
            "--tls-cert-file needs --tls-key-file"
        );
        assert_eq!(
            sec(false, true, true, false)
                .check(listen)
                .unwrap_err()
                .to_string(),
            "--tls-key-file needs --tls-cert-file"
        );
        assert_eq!(
            sec(false, false, false, true).check(listen),
            Err(SecurityError::ClientCaWithoutTls)
        );
    }
}

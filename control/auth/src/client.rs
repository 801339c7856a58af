//! The consumer's side of the auth protocol: `GET <url>/ids` and `POST
//! <url>/identity/certificate` over HTTPS, the provider's certificate verified against the
//! platform's roots, or not verified at all with `insecure_skip_tls_verify` (as upstream's
//! `insecureSkipTLSVerify`, for the self-signed certificate liqo-auth makes by default).
//!
//! Without verification an active man-in-the-middle on the path to the provider can pose as it
//! and capture both tokens the request carries (the provider's token, which lets it ask for an
//! identity in our name, and ours, which lets it ask our cluster) and hand us a certificate of
//! its choosing; upstream has the same property. To avoid it, serve liqo-auth with a
//! certificate from a CA the consumers trust (e.g. behind a TLS-terminating load balancer) and
//! keep verification on.

use std::{sync::Arc, time::Duration};

use control::{
    consts::auth,
    identity::{self, CertificateIdentityRequest, CertificateIdentityResponse, ClusterInfo},
};
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use liqo_types::FieldError;
use rustls::{
    ClientConfig, DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::{CryptoProvider, WebPkiSupportedAlgorithms},
    pki_types::{CertificateDer, ServerName, UnixTime},
};

/// The longest answer read.
const MAX_BODY: usize = 1 << 20;
/// How long `GET /ids` may take.
const IDS_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `POST /identity/certificate` may take (the provider waits up to 30 s for its
/// apiserver to sign).
const CERTIFICATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a request to an auth service failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL is not an `https://` (or `http://`) URL.
    #[error("auth URL {url:?} is invalid: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: &'static str,
        /// The parser's error, if it failed.
        #[source]
        source: Option<http::uri::InvalidUri>,
    },
    /// The TLS configuration could not be made (e.g. no platform roots).
    #[error("cannot set up TLS certificate verification")]
    Tls(#[source] rustls::Error),
    /// The request did not get an answer.
    #[error("{url} unreachable")]
    Transport {
        /// The request's URL.
        url: String,
        /// The cause.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// Reading the answer failed (or it is longer than 1 MiB).
    #[error("{url}: reading the answer")]
    Body {
        /// The request's URL.
        url: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No answer in time.
    #[error("{url}: no answer in {secs} s")]
    Timeout {
        /// The request's URL.
        url: String,
        /// The limit.
        secs: u64,
    },
    /// The service answered with an error status.
    #[error("{url} answered {status}: {message}")]
    Status {
        /// The request's URL.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the answer's body.
        message: String,
    },
    /// A success whose body is not the expected JSON.
    #[error("{url}: unexpected answer")]
    Decode {
        /// The request's URL.
        url: String,
        /// The field that failed.
        #[source]
        source: FieldError,
    },
}

impl ClientError {
    /// The HTTP status of the answer, `None` when there was no usable answer (for
    /// [`control::identity::authentication`]).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A client of auth services.
#[derive(Clone)]
pub struct AuthClient {
    http: Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, rustls::Error>,
}

impl std::fmt::Debug for AuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthClient").finish_non_exhaustive()
    }
}

impl AuthClient {
    /// A client; `insecure_skip_tls_verify` accepts any server certificate (the auth
    /// service's is self-signed), with the risk the module documentation states.
    pub fn new(insecure_skip_tls_verify: bool) -> Self {
        let http = tls_config(insecure_skip_tls_verify).map(|tls| {
            let https = HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .build();
            Client::builder(TokioExecutor::new()).build(https)
        });
        AuthClient { http }
    }

    /// `GET <url>/ids`: who the cluster is.
    pub async fn ids(&self, url: &str) -> Result<ClusterInfo, ClientError> {
        let (url, body) = self
            .call(url, auth::IDS_PATH, Method::GET, None, IDS_TIMEOUT)
            .await?;
        identity::decode(&body).map_err(|source| ClientError::Decode { url, source })
    }

    /// `POST <url>/identity/certificate`: asks the provider to sign our identity.
    pub async fn certificate(
        &self,
        url: &str,
        request: &CertificateIdentityRequest,
    ) -> Result<CertificateIdentityResponse, ClientError> {
        let json = serde_json::to_vec(request).expect("the request serializes");
        let (url, body) = self
            .call(
                url,
                auth::CERTIFICATE_PATH,
                Method::POST,
                Some(json),
                CERTIFICATE_TIMEOUT,
            )
            .await?;
        identity::decode(&body).map_err(|source| ClientError::Decode { url, source })
    }

    /// One exchange as raw bytes, whatever the answer's status: `(status, body)`. For tools
    /// and tests that must send exact bytes (a replay) or forward an answer untouched.
    pub async fn raw(
        &self,
        base: &str,
        path: &str,
        method: Method,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), ClientError> {
        let (_, status, bytes) = self
            .exchange(base, path, method, body, CERTIFICATE_TIMEOUT)
            .await?;
        Ok((status.as_u16(), bytes.to_vec()))
    }

    async fn call(
        &self,
        base: &str,
        path: &str,
        method: Method,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(String, Vec<u8>), ClientError> {
        let (url, status, bytes) = self.exchange(base, path, method, body, timeout).await?;
        if !status.is_success() {
            return Err(ClientError::Status {
                url,
                status: status.as_u16(),
                message: short(&bytes),
            });
        }
        debug_assert!(status != StatusCode::NO_CONTENT || bytes.is_empty());
        Ok((url, bytes.to_vec()))
    }

    async fn exchange(
        &self,
        base: &str,
        path: &str,
        method: Method,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(String, StatusCode, Bytes), ClientError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| ClientError::Tls(e.clone()))?;
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let uri: http::Uri = url.parse().map_err(|e| ClientError::Url {
            url: base.to_owned(),
            reason: "not a URL",
            source: Some(e),
        })?;
        if !matches!(uri.scheme_str(), Some("https" | "http")) || uri.host().is_none() {
            return Err(ClientError::Url {
                url: base.to_owned(),
                reason: "expected https://host[:port]",
                source: None,
            });
        }
        let mut req = Request::builder().method(method).uri(uri);
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .expect("a valid request");
        let exchange = async {
            let resp = http
                .request(req)
                .await
                .map_err(|source| ClientError::Transport {
                    url: url.clone(),
                    source,
                })?;
            let status = resp.status();
            let bytes = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|source| ClientError::Body {
                    url: url.clone(),
                    source,
                })?
                .to_bytes();
            Ok::<_, ClientError>((status, bytes))
        };
        let (status, bytes) =
            tokio::time::timeout(timeout, exchange)
                .await
                .map_err(|_elapsed| ClientError::Timeout {
                    url: url.clone(),
                    secs: timeout.as_secs(),
                })??;
        Ok((url, status, bytes))
    }
}

/// The first line of an error body, at most 200 characters.
fn short(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text.lines().next().unwrap_or_default().trim();
    line.chars().take(200).collect()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_config(insecure: bool) -> Result<ClientConfig, rustls::Error> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth()
    } else {
        use rustls_platform_verifier::BuilderVerifierExt;
        builder.with_platform_verifier()?.with_no_client_auth()
    };
    Ok(config)
}

/// Accepts any server certificate, still checking that the server holds its key.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_carry_a_status() {
        let status = ClientError::Status {
            url: "https://x/ids".into(),
            status: 403,
            message: "forbidden".into(),
        };
        assert_eq!(status.http_status(), Some(403));
        let timeout = ClientError::Timeout {
            url: "https://x/ids".into(),
            secs: 10,
        };
        assert_eq!(timeout.http_status(), None);
        assert_eq!(short(b"bad request: x\nmore"), "bad request: x");
    }

    #[tokio::test]
    async fn bad_urls_are_refused_before_any_io() {
        let c = AuthClient::new(true);
        let e = c.ids("ftp://host").await.unwrap_err();
        assert!(matches!(e, ClientError::Url { .. }), "{e}");
        assert!(std::error::Error::source(&e).is_none());
        let e = c.ids("not a url").await.unwrap_err();
        assert!(e.to_string().contains("\"not a url\""), "{e}");
        // The parser's error is the source, not part of the message.
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
    }

    #[tokio::test]
    async fn an_answer_over_the_limit_is_a_body_error_with_its_cause() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0);
            let body = vec![b'x'; MAX_BODY + 1];
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            s.write_all(head.as_bytes()).await.unwrap();
            // The client may stop reading (and close) once over the limit.
            let _ = s.write_all(&body).await;
        });
        let e = AuthClient::new(true)
            .ids(&format!("http://{addr}"))
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::Body { .. }), "{e}");
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("http://{addr}/ids: reading the answer")
        );
        server.await.unwrap();
    }

    #[tokio::test]
    async fn an_unreachable_service_has_no_status() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = AuthClient::new(true)
            .ids(&format!("https://127.0.0.1:{port}"))
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::Transport { .. }), "{e}");
        assert_eq!(e.http_status(), None);
    }
}

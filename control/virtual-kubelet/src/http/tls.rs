//! The kubelet API's TLS: a self-signed serving certificate made at start (rcgen; the node's
//! IP as SAN: the home API server only checks it when given `--kubelet-certificate-authority`),
//! and client certificates required and verified against the configured CA (the CA of the
//! home API server's `--kubelet-client-certificate`). Ring only, as everywhere else.

use std::{net::IpAddr, path::Path, sync::Arc};

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, SanType};
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

/// Why the TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The serving certificate could not be made.
    #[error("making the serving certificate")]
    Cert(#[source] rcgen::Error),
    /// The client CA file could not be read or holds no certificate.
    #[error("reading the client CA {path}")]
    Ca {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The client CA file holds no usable CA certificate.
    #[error("the client CA {0} holds no usable certificate")]
    NoCa(String),
    /// rustls refused the configuration.
    #[error("the TLS configuration")]
    Rustls(#[source] rustls::Error),
    /// The client verifier could not be built.
    #[error("the client certificate verifier")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
}

/// The crypto provider: ring only.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A self-signed serving certificate for `node` at `ip`.
fn serving_cert(
    node: &str,
    ip: IpAddr,
) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), TlsError> {
    let mut params = CertificateParams::new(vec![node.to_owned()]).map_err(TlsError::Cert)?;
    params.distinguished_name.push(DnType::CommonName, node);
    params.subject_alt_names.push(SanType::IpAddress(ip));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(TlsError::Cert)?;
    let cert = params.self_signed(&key).map_err(TlsError::Cert)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((cert.der().clone(), key))
}

/// The server configuration: client certificates signed by `client_ca` required; without a
/// CA, none asked for (the caller then serves `/healthz` only).
pub fn server_config(
    node: &str,
    ip: IpAddr,
    client_ca: Option<&Path>,
) -> Result<ServerConfig, TlsError> {
    let (cert, key) = serving_cert(node, ip)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rustls)?;
    let mut config = match client_ca {
        Some(path) => {
            let shown = path.display().to_string();
            let mut roots = RootCertStore::empty();
            for der in CertificateDer::pem_file_iter(path).map_err(|source| TlsError::Ca {
                path: shown.clone(),
                source,
            })? {
                let der = der.map_err(|source| TlsError::Ca {
                    path: shown.clone(),
                    source,
                })?;
                // A certificate that is not a usable trust anchor is skipped; none at all is
                // an error below.
                if let Err(e) = roots.add(der) {
                    tracing::warn!(ca = %shown, error = %e, "skipping a client CA certificate");
                }
            }
            if roots.is_empty() {
                return Err(TlsError::NoCa(shown));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(TlsError::Verifier)?;
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(vec![cert], key)
        }
        None => builder
            .with_no_client_auth()
            .with_single_cert(vec![cert], key),
    }
    .map_err(TlsError::Rustls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

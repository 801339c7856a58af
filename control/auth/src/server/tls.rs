//! The service's TLS certificate: self-signed, made in-process at start (as upstream's), for
//! `localhost`, `127.0.0.1`, the listen address and any extra names.

use std::net::IpAddr;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// Why the certificate or the TLS configuration cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating the certificate failed.
    #[error("generating a self-signed certificate for {sans:?}")]
    Generate {
        /// Its names.
        sans: Vec<String>,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// rustls refused the configuration.
    #[error("configuring TLS")]
    Config(#[source] rustls::Error),
}

/// The names of the certificate.
pub(super) fn sans(listen: IpAddr, extra: &[String]) -> Vec<String> {
    let mut sans = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if !listen.is_unspecified() {
        sans.push(listen.to_string());
    }
    sans.extend(extra.iter().cloned());
    sans.dedup();
    let mut seen = std::collections::BTreeSet::new();
    sans.retain(|s| seen.insert(s.clone()));
    sans
}

/// A TLS acceptor with a new self-signed certificate for `localhost`, `127.0.0.1`, `listen`
/// and `extra`, and the certificate (PEM).
pub fn self_signed(listen: IpAddr, extra: &[String]) -> Result<(TlsAcceptor, String), TlsError> {
    let sans = sans(listen, extra);
    let certified = rcgen::generate_simple_self_signed(sans.clone())
        .map_err(|source| TlsError::Generate { sans, source })?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let cert: CertificateDer<'static> = certified.cert.der().clone();
    let acceptor = crate::https::acceptor(vec![cert], key).map_err(TlsError::Config)?;
    Ok((acceptor, certified.cert.pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_localhost_the_listen_address_and_extras_once() {
        let s = sans(
            "10.0.0.5".parse().unwrap(),
            &["auth.example".into(), "127.0.0.1".into()],
        );
        assert_eq!(s, ["localhost", "127.0.0.1", "10.0.0.5", "auth.example"]);
        let s = sans("0.0.0.0".parse().unwrap(), &[]);
        assert_eq!(s, ["localhost", "127.0.0.1"]);
    }

    #[test]
    fn makes_an_acceptor() {
        let (_, pem) = self_signed("127.0.0.1".parse().unwrap(), &[]).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}

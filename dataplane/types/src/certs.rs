//! A CA and the serving certificate it signs, made and kept by the component that serves with
//! them (the controller-manager's webhooks in Secret `liqo-webhook-certs`, `liqo-ipam` in
//! Secret `liqo-ipam-tls`): the PEM material such a Secret holds ([`Material`]), what it is as
//! read from its certificates ([`inspect`]), the decision to reuse, reissue or replace it
//! ([`Profile::plan`], pure, time as input), and making it ([`Profile::make`]: rcgen on ring,
//! ECDSA P-256 keys from the kernel's random source). A [`Profile`] is the caller's policy: the
//! names and how long each certificate lives. It never reads or writes a Secret (the callers
//! do) and never shows a key ([`Material`]'s `Debug` leaves them out).
//!
//! Such a Secret is `Opaque`, not `kubernetes.io/tls`: besides `tls.crt`/`tls.key` it holds the
//! CA's certificate and private key (`ca.crt`, `ca.key`), which the TLS type does not describe
//! and which tools reading TLS Secrets must not take for the serving pair.
//!
//! Behind the `certs` feature (rcgen and x509-parser), so that the crates that make no
//! certificate do not build them.

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData,
};
use x509_parser::{
    extensions::GeneralName,
    pem::{Pem, parse_x509_pem},
};

/// The CA certificate's key in a Secret (PEM).
pub const CA_CERT: &str = "ca.crt";
/// The CA's private key (PEM, PKCS#8).
pub const CA_KEY: &str = "ca.key";
/// The serving certificate (PEM).
pub const TLS_CERT: &str = "tls.crt";
/// The serving key (PEM, PKCS#8).
pub const TLS_KEY: &str = "tls.key";

/// One year, the unit of the profiles' validities.
pub const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
/// One day.
pub const DAY: Duration = Duration::from_secs(24 * 3600);

/// A caller's policy: what its certificates are called and how long they live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The serving certificate's common name when it has no name; the CA's is `<name>-ca`.
    pub name: &'static str,
    /// How long a new CA is valid.
    pub ca_validity: Duration,
    /// How long a new serving certificate is valid (never past its CA's end).
    pub cert_validity: Duration,
    /// A serving certificate with less left than this is reissued.
    pub cert_renew_before: Duration,
    /// A CA with less left than this is replaced.
    pub ca_renew_before: Duration,
}

/// The PEM material (a Secret's four keys). Its `Debug` never shows the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Material {
    /// The CA certificate (what clients trust).
    pub ca_cert: String,
    /// The CA key.
    pub ca_key: String,
    /// The serving certificate.
    pub cert: String,
    /// The serving key.
    pub key: String,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("ca_cert", &self.ca_cert)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl Material {
    /// The material of a Secret's data (`get` gives a key's bytes): `None` unless each of the
    /// four keys holds UTF-8.
    pub fn from_data<'a>(get: impl Fn(&str) -> Option<&'a [u8]>) -> Option<Material> {
        let text = |k: &str| get(k).and_then(|b| String::from_utf8(b.to_vec()).ok());
        Some(Material {
            ca_cert: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            cert: text(TLS_CERT)?,
            key: text(TLS_KEY)?,
        })
    }

    /// The Secret's keys and their texts (what [`Material::from_data`] reads back).
    pub fn data(&self) -> [(&'static str, &str); 4] {
        [
            (CA_CERT, &self.ca_cert),
            (CA_KEY, &self.ca_key),
            (TLS_CERT, &self.cert),
            (TLS_KEY, &self.key),
        ]
    }
}

/// What a stored Material is, as read from its certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// When the CA becomes valid.
    pub ca_not_before: SystemTime,
    /// When the CA expires.
    pub ca_not_after: SystemTime,
    /// When the serving certificate becomes valid.
    pub cert_not_before: SystemTime,
    /// When the serving certificate expires.
    pub cert_not_after: SystemTime,
    /// The serving certificate's DNS names and IP addresses.
    pub cert_sans: Vec<String>,
    /// Whether the serving certificate is signed by the CA, and each key is its certificate's.
    pub consistent: bool,
}

/// What to do with the stored material.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Keep it all.
    Reuse,
    /// Keep the CA, sign a new serving certificate with it (names changed or near expiry).
    Reissue,
    /// A new CA and serving certificate (none stored, unreadable, inconsistent, or the CA near
    /// expiry).
    New,
}

/// Why certificates cannot be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen failed.
    #[error("generating the certificates")]
    Generate(#[source] rcgen::Error),
    /// A stored PEM is not a certificate.
    #[error("the stored {what} is not a PEM certificate: {reason}")]
    Parse {
        /// Which one.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A stored key is not a PEM private key.
    #[error("the stored {what} is not a PEM private key")]
    Key {
        /// Which one.
        what: &'static str,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
}

fn left(not_after: SystemTime, now: SystemTime) -> Duration {
    not_after.duration_since(now).unwrap_or_default()
}

fn pem(what: &'static str, text: &str) -> Result<Pem, CertError> {
    parse_x509_pem(text.as_bytes())
        .map(|(_, p)| p)
        .map_err(|e| CertError::Parse {
            what,
            reason: e.to_string(),
        })
}

fn parse<'a>(
    what: &'static str,
    p: &'a Pem,
) -> Result<x509_parser::certificate::X509Certificate<'a>, CertError> {
    p.parse_x509().map_err(|e| CertError::Parse {
        what,
        reason: e.to_string(),
    })
}

fn time(t: x509_parser::time::ASN1Time) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(t.timestamp()).unwrap_or(0))
}

/// Reads what `m` holds.
pub fn inspect(m: &Material) -> Result<Inspected, CertError> {
    let ca_pem = pem("CA certificate", &m.ca_cert)?;
    let cert_pem = pem("serving certificate", &m.cert)?;
    let ca = parse("CA certificate", &ca_pem)?;
    let cert = parse("serving certificate", &cert_pem)?;
    let ca_key = KeyPair::from_pem(&m.ca_key).map_err(|source| CertError::Key {
        what: "CA key",
        source,
    })?;
    let key = KeyPair::from_pem(&m.key).map_err(|source| CertError::Key {
        what: "serving key",
        source,
    })?;
    let mut cert_sans = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => cert_sans.push((*d).to_owned()),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => cert_sans.push(
                        std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).unwrap_or_default())
                            .to_string(),
                    ),
                    16 => cert_sans.push(
                        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).unwrap_or_default())
                            .to_string(),
                    ),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    let consistent = cert.verify_signature(Some(ca.public_key())).is_ok()
        && ca.public_key().raw == ca_key.subject_public_key_info()
        && cert.public_key().raw == key.subject_public_key_info();
    Ok(Inspected {
        ca_not_before: time(ca.validity().not_before),
        ca_not_after: time(ca.validity().not_after),
        cert_not_before: time(cert.validity().not_before),
        cert_not_after: time(cert.validity().not_after),
        cert_sans,
        consistent,
    })
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

impl Profile {
    /// The decision: `stored` is `None` when there is nothing (or nothing readable) stored. A
    /// certificate not yet valid at `now` (made by a clock ahead of ours) counts as expired.
    pub fn plan(&self, stored: Option<&Inspected>, sans: &[String], now: SystemTime) -> Plan {
        let Some(s) = stored else { return Plan::New };
        if !s.consistent
            || s.ca_not_before > now
            || left(s.ca_not_after, now) < self.ca_renew_before
        {
            return Plan::New;
        }
        let covers = sans.iter().all(|n| s.cert_sans.contains(n));
        if !covers
            || s.cert_not_before > now
            || left(s.cert_not_after, now) < self.cert_renew_before
        {
            return Plan::Reissue;
        }
        Plan::Reuse
    }

    fn ca_params(&self) -> CertificateParams {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("{}-ca", self.name));
        p.distinguished_name = dn;
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p
    }

    /// Makes what `plan` asks (`Reuse` returns `stored` unchanged; `Reissue` without `stored`
    /// makes all anew) for the names `sans` (DNS names or IP addresses; the first is the
    /// serving certificate's common name). The serving certificate never outlives its CA.
    pub fn make(
        &self,
        plan: Plan,
        stored: Option<&Material>,
        sans: &[String],
        now: SystemTime,
    ) -> Result<Material, CertError> {
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        let at = |t: SystemTime| epoch + since_epoch(t);
        let (ca_cert, ca_key_pem, ca_end) = match (plan, stored) {
            (Plan::Reuse, Some(m)) => return Ok(m.clone()),
            (Plan::Reissue, Some(m)) => {
                let p = pem("CA certificate", &m.ca_cert)?;
                let end = time(parse("CA certificate", &p)?.validity().not_after);
                (m.ca_cert.clone(), m.ca_key.clone(), end)
            }
            _ => {
                let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                    .map_err(CertError::Generate)?;
                let mut p = self.ca_params();
                let end = now + self.ca_validity;
                p.not_before = at(now) - Duration::from_secs(60);
                p.not_after = at(end);
                let cert = p.self_signed(&key).map_err(CertError::Generate)?;
                (cert.pem(), key.serialize_pem(), end)
            }
        };
        let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|source| CertError::Key {
            what: "CA key",
            source,
        })?;
        // The issuer's name as the CA certificate holds it, whoever made it.
        let issuer = Issuer::from_ca_cert_pem(&ca_cert, ca_key).map_err(|e| CertError::Parse {
            what: "CA certificate",
            reason: e.to_string(),
        })?;
        let key =
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(CertError::Generate)?;
        let mut p = CertificateParams::new(sans.to_vec()).map_err(CertError::Generate)?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            sans.first().map_or(self.name, String::as_str),
        );
        p.distinguished_name = dn;
        p.not_before = at(now) - Duration::from_secs(60);
        p.not_after = at((now + self.cert_validity).min(ca_end));
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = p.signed_by(&key, &issuer).map_err(CertError::Generate)?;
        Ok(Material {
            ca_cert,
            ca_key: ca_key_pem,
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests;

//! The webhook's CA and serving certificate in the Secret `liqo-webhook-certs`: the webhooks'
//! [`PROFILE`] (a CA of 10 years, serving certificates of one, reissued 30 days before their end)
//! over the shared material, decision and making of `liqo_types::certs` (which liqo-ipam uses
//! too). It never reads or writes the Secret (the caller does) and never logs a key.

use std::time::{Duration, SystemTime};

pub use liqo_types::certs::{
    CA_CERT, CA_KEY, CertError, Inspected, Material, Plan, Profile, TLS_CERT, TLS_KEY, inspect,
};

/// How long a CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long a serving certificate is valid.
pub const CERT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// A serving certificate with less left than this is reissued.
pub const CERT_RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// A CA with less left than this is replaced (so that a certificate it signs never outlives it).
pub const CA_RENEW_BEFORE: Duration = CERT_VALIDITY;

/// The webhooks' policy (the CA's common name is `liqo-webhook-ca`).
pub const PROFILE: Profile = Profile {
    name: "liqo-webhook",
    ca_validity: CA_VALIDITY,
    cert_validity: CERT_VALIDITY,
    cert_renew_before: CERT_RENEW_BEFORE,
    ca_renew_before: CA_RENEW_BEFORE,
};

/// The decision under [`PROFILE`] ([`Profile::plan`]).
pub fn plan(stored: Option<&Inspected>, sans: &[String], now: SystemTime) -> Plan {
    PROFILE.plan(stored, sans, now)
}

/// Makes what `plan` asks under [`PROFILE`] ([`Profile::make`]).
pub fn make(
    plan: Plan,
    stored: Option<&Material>,
    sans: &[String],
    now: SystemTime,
) -> Result<Material, CertError> {
    PROFILE.make(plan, stored, sans, now)
}

#[cfg(test)]
mod tests;

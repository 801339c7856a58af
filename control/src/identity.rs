//! The auth service's wire protocol, as upstream Liqo v0.5 speaks it (JSON, field names and
//! base64 as upstream), and the auth token ([`AuthToken`]):
//!
//! - `GET /ids` answers [`ClusterInfo`] (`{clusterId, clusterName}`);
//! - `POST /identity/certificate` takes a [`CertificateIdentityRequest`] (`{cluster:
//!   {clusterID, clusterName}, originClusterToken, destinationClusterToken,
//!   certificateSigningRequest}`) and answers 202 with a [`CertificateIdentityResponse`]
//!   (`{namespace, certificate, apiServerUrl, apiServerCA}`); the CSR, the certificate and the
//!   CA are PEM bytes, base64 on the wire.
//!
//! A repeated request proves possession of its CSR's key ([`proof`]); [`check`] decides
//! whether an auth service (and the API server behind an identity) is the cluster a
//! ForeignCluster names. [`decode`] reads a body naming the field of any error; [`authentication`] turns the
//! answer to a request into the consumer's `AuthenticationStatus`. No HTTP here: `liqo-auth`
//! serves these types, the ForeignCluster controller and `liqoctl` send them.

pub mod check;
pub mod proof;
mod token;

pub use proof::Proof;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

pub use token::{
    AuthToken, InvalidToken, PresentedToken, RandomUnavailable, TOKEN_BYTES, TOKEN_LEN, TokenCheck,
};

use crate::{
    api::{ClusterId, ClusterName, discovery::ClusterIdentity},
    conditions::Authentication,
    names::NamespaceName,
};
use liqo_types::FieldError;

/// `GET /ids`: who the cluster is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// The cluster ID.
    pub cluster_id: ClusterId,
    /// The cluster name.
    pub cluster_name: ClusterName,
}

/// `POST /identity/certificate`: a consumer asks the provider to sign its identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateIdentityRequest {
    /// The consumer (the certificate's CN is its cluster ID).
    pub cluster: ClusterIdentity,
    /// The consumer's own token, so the provider can authenticate back (upstream omits it
    /// when empty).
    #[serde(default, skip_serializing_if = "PresentedToken::is_empty")]
    pub origin_cluster_token: PresentedToken,
    /// The provider's token, as the consumer was given it.
    #[serde(default)]
    pub destination_cluster_token: PresentedToken,
    /// The certificate signing request (PEM).
    #[serde(with = "b64")]
    pub certificate_signing_request: Vec<u8>,
    /// Proof that the sender holds the CSR's key ([`proof`]): needed for a repeated request
    /// to be answered; absent from upstream's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof_of_possession: Option<Proof>,
}

impl CertificateIdentityRequest {
    /// A consumer's request: its identity and token, the provider's token if it has one, its
    /// CSR (PEM).
    pub fn new(
        consumer: ClusterIdentity,
        ours: &AuthToken,
        theirs: Option<&AuthToken>,
        csr_pem: Vec<u8>,
    ) -> Self {
        Self {
            cluster: consumer,
            origin_cluster_token: ours.into(),
            destination_cluster_token: theirs.map(PresentedToken::from).unwrap_or_default(),
            certificate_signing_request: csr_pem,
            proof_of_possession: None,
        }
    }

    /// This request with a proof of possession of its CSR's key.
    pub fn with_proof(mut self, proof: Proof) -> Self {
        self.proof_of_possession = Some(proof);
        self
    }
}

/// The answer (202) to a [`CertificateIdentityRequest`]: the consumer's identity at the
/// provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateIdentityResponse {
    /// The provider's tenant namespace for the consumer.
    pub namespace: NamespaceName,
    /// The signed certificate (PEM).
    #[serde(with = "b64")]
    pub certificate: Vec<u8>,
    /// The provider's API server.
    pub api_server_url: String,
    /// The CA of the provider's API server (PEM); absent when it is publicly trusted.
    #[serde(
        rename = "apiServerCA",
        default,
        with = "b64_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_ca: Option<Vec<u8>>,
}

/// Decodes a JSON body into one of these types; every error names its field
/// (`cluster.clusterID: ...`, `certificate: not base64 ...`).
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FieldError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| liqo_types::field::bad("<body>", format!("not JSON: {e}")))?;
    liqo_types::field::json(value)
}

/// The consumer's `AuthenticationStatus` after asking for an identity: `http_status` is the
/// answer's status code, `None` when the auth service could not be reached; `sent_token`
/// whether we had a token for the provider. 200/201/202 accept; 401 and 403 deny
/// (`EmptyDenied` without a token); anything else leaves it pending.
pub fn authentication(http_status: Option<u16>, sent_token: bool) -> Authentication {
    match http_status {
        None => Authentication::NotReachable,
        Some(200..=202) => Authentication::Accepted,
        Some(401 | 403) if sent_token => Authentication::Denied,
        Some(401 | 403) => Authentication::EmptyDenied,
        Some(_) => Authentication::Pending,
    }
}

/// Bytes as standard base64 strings (upstream's `base64.StdEncoding`).
mod b64 {
    use base64::{Engine, engine::general_purpose::STANDARD};
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(|e| D::Error::custom(format!("not base64 ({e})")))
    }
}

/// An optional [`b64`] field (`None` when absent or empty, as upstream's `omitempty`).
mod b64_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        super::b64::serialize(bytes.as_deref().unwrap_or_default(), s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::b64")] Vec<u8>);
        let bytes = Option::<Wrap>::deserialize(d)?.map(|Wrap(b)| b);
        Ok(bytes.filter(|b| !b.is_empty()))
    }
}

#[cfg(test)]
mod tests;

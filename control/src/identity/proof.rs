//! Proof of possession of a CSR's key, for a repeated identity request.
//!
//! A provider answers an identity request whose CSR it signed before (the consumer's first
//! answer may have been lost) with the stored certificate only when the request proves that
//! its sender holds the CSR's private key: [`Proof`] is a signature, with that key, over
//! [`message`]: a fixed context, the PROVIDER's cluster ID (a proof made for one provider is
//! worth nothing at another), a digest of the CSR and the time the proof was made (unix
//! milliseconds). The provider records the time of the newest proof it accepted and accepts
//! only newer ones, so a captured request replayed byte for byte is refused: no clock needs to
//! agree between the clusters. A request without a proof (an upstream Liqo consumer) still
//! gets a first identity; a repeated one is refused, as upstream.
//!
//! Only the message is built here (pure); the consumer signs it with its key, the provider
//! verifies it with the CSR's public key.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api::ClusterId;

/// The first line of every signed message (a signature for anything else never verifies).
pub const PROOF_CONTEXT: &str = "liqo-auth proof of possession v1";

/// `proofOfPossession` of an identity request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proof {
    /// When the proof was made (unix milliseconds, the consumer's clock): each proof a
    /// provider accepts must be newer than the last.
    pub time_ms: u64,
    /// The signature of [`message`] with the CSR's key (ECDSA P-256 with SHA-256, ASN.1 DER;
    /// or Ed25519), base64 on the wire.
    #[serde(with = "super::b64")]
    pub signature: Vec<u8>,
}

/// The bytes a proof signs: the context, the provider's cluster ID, the SHA-256 of the CSR
/// (lowercase hex) and the time, one per line.
pub fn message(provider: &ClusterId, csr_pem: &[u8], time_ms: u64) -> Vec<u8> {
    let digest = hex::encode(Sha256::digest(csr_pem));
    format!("{PROOF_CONTEXT}\n{provider}\n{digest}\n{time_ms}\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_binds_provider_csr_and_time() {
        let a: ClusterId = "b07938e3-d241-460c-a77b-e286c0f733c7".parse().unwrap();
        let b: ClusterId = "3f1e7f52-6b8a-4d4c-9a0f-1c2d3e4f5a6b".parse().unwrap();
        let m = message(&a, b"csr", 1_700_000_000_123);
        let text = String::from_utf8(m.clone()).unwrap();
        assert_eq!(
            text,
            format!(
                "{PROOF_CONTEXT}\n{a}\n{}\n1700000000123\n",
                hex::encode(Sha256::digest(b"csr"))
            )
        );
        assert_ne!(m, message(&b, b"csr", 1_700_000_000_123));
        assert_ne!(m, message(&a, b"csr\n", 1_700_000_000_123));
        assert_ne!(m, message(&a, b"csr", 1_700_000_000_124));
    }

    #[test]
    fn wire_form() {
        let p = Proof {
            time_ms: 42,
            signature: vec![1, 2, 3],
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v, serde_json::json!({"timeMs": 42, "signature": "AQID"}));
        assert_eq!(serde_json::from_value::<Proof>(v).unwrap(), p);
    }
}

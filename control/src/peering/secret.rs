//! What our identity Secret at a peer says, read without an apiserver: the selector that finds
//! it, a value of its data, and its state (missing, unsigned, signed with the peer's tenant
//! namespace). The controller-manager writes and uses it; `liqoctl unpeer` reads it.

use k8s_openapi::api::core::v1::Secret;

use super::fc::IdentityState;
use crate::{
    api::ClusterId,
    consts::{keys, labels, values},
};

/// The selector of our identity Secret for a peer.
pub fn selector(peer: &ClusterId) -> String {
    format!(
        "{}={},{}={peer}",
        labels::LOCAL_IDENTITY,
        values::TRUE,
        labels::CLUSTER_ID
    )
}

/// A value of the Secret's data, if present and not empty.
pub fn data<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
        .filter(|b| !b.is_empty())
}

/// What an identity Secret (if any) says.
pub fn state(secret: Option<&Secret>) -> IdentityState {
    let Some(secret) = secret else {
        return IdentityState::Missing;
    };
    let signed = data(secret, keys::CERTIFICATE).is_some();
    match data(secret, keys::NAMESPACE) {
        Some(ns) if signed => IdentityState::Signed {
            namespace: String::from_utf8_lossy(ns).into_owned(),
        },
        _ => IdentityState::Unsigned,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn state_reads_the_secret() {
        assert_eq!(state(None), IdentityState::Missing);
        let unsigned = secret(&[(keys::PRIVATE_KEY, b"k"), (keys::CSR, b"c")]);
        assert_eq!(state(Some(&unsigned)), IdentityState::Unsigned);
        let signed = secret(&[
            (keys::PRIVATE_KEY, b"k"),
            (keys::CERTIFICATE, b"cert"),
            (keys::NAMESPACE, b"liqo-tenant-rome-abcdef"),
        ]);
        assert_eq!(
            state(Some(&signed)),
            IdentityState::Signed {
                namespace: "liqo-tenant-rome-abcdef".into()
            }
        );
    }
}

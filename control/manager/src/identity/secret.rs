//! The identity Secret: the key and CSR we make, the proof of possession, the signed
//! certificate and the peer's API server it holds, its state, and the kubeconfig built from it.

use base64::{Engine, engine::general_purpose::STANDARD};
use control::{
    api::ClusterId,
    consts::{auth, keys},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, api::ListParams, config::Kubeconfig};

pub use control::peering::secret::{data, selector, state};

/// Why an identity could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// rcgen refused to make the key or the CSR.
    #[error("cannot make the identity's key or CSR")]
    Generate(#[source] rcgen::Error),
    /// The identity Secret lacks a key.
    #[error("identity Secret {secret}: no {key:?}")]
    Missing {
        /// The Secret.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// The kube config built from the Secret was refused.
    #[error("identity Secret {secret}: not a usable kube config")]
    Config {
        /// The Secret.
        secret: String,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kube config did not take the Secret's values.
    #[error("identity Secret {secret}: cannot shape a kube config")]
    Shape {
        /// The Secret.
        secret: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The kube client could not be built.
    #[error("identity Secret {secret}: cannot build a client")]
    Client {
        /// The Secret.
        secret: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The identity's key does not load or cannot sign (a proof of possession).
    #[error("identity Secret {secret}: its private key cannot sign a proof of possession")]
    Prove {
        /// The Secret.
        secret: String,
        /// Why.
        #[source]
        source: rcgen::Error,
    },
    /// Listing the identity Secrets failed.
    #[error("cannot list the identity Secrets in {namespace}")]
    List {
        /// The tenant namespace.
        namespace: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// A new key (PKCS#8 PEM) and its CSR (PEM).
pub struct NewIdentity {
    /// The private key, PEM.
    pub private_key_pem: String,
    /// The certificate signing request, PEM.
    pub csr_pem: String,
}

impl std::fmt::Debug for NewIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewIdentity")
            .field("csr_pem", &self.csr_pem)
            .finish_non_exhaustive()
    }
}

/// Makes a key (ECDSA P-256) and a CSR with CN = our cluster ID, O = `liqo.io`.
pub fn new_identity(local: &ClusterId) -> Result<NewIdentity, IdentityError> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(IdentityError::Generate)?;
    let mut params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(IdentityError::Generate)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, local.as_str());
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, auth::CSR_ORGANIZATION);
    let csr = params
        .serialize_request(&key)
        .map_err(IdentityError::Generate)?;
    Ok(NewIdentity {
        private_key_pem: key.serialize_pem(),
        csr_pem: csr.pem().map_err(IdentityError::Generate)?,
    })
}

/// A proof that we hold the identity's key ([`control::identity::proof`]), for `provider`, made
/// at `time_ms` (unix milliseconds): what lets the provider answer a repeated request.
pub fn prove(
    secret: &Secret,
    provider: &ClusterId,
    time_ms: u64,
) -> Result<control::identity::Proof, IdentityError> {
    use rcgen::SigningKey;
    let name = secret.metadata.name.clone().unwrap_or_default();
    let missing = |key| IdentityError::Missing {
        secret: name.clone(),
        key,
    };
    let pem = data(secret, keys::PRIVATE_KEY).ok_or_else(|| missing(keys::PRIVATE_KEY))?;
    let csr = data(secret, keys::CSR).ok_or_else(|| missing(keys::CSR))?;
    let prove = |source| IdentityError::Prove {
        secret: name.clone(),
        source,
    };
    let key = rcgen::KeyPair::from_pem(&String::from_utf8_lossy(pem)).map_err(prove)?;
    let message = control::identity::proof::message(provider, csr, time_ms);
    Ok(control::identity::Proof {
        time_ms,
        signature: key.sign(&message).map_err(prove)?,
    })
}

/// The identity Secret for a peer in our tenant namespace (the newest if several).
pub async fn find(
    client: &Client,
    namespace: &str,
    peer: &ClusterId,
) -> Result<Option<Secret>, IdentityError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(&selector(peer)))
        .await
        .map_err(|source| IdentityError::List {
            namespace: namespace.into(),
            source,
        })?;
    Ok(list
        .items
        .into_iter()
        .max_by_key(|s| s.metadata.creation_timestamp.clone()))
}

/// The kube config of a signed identity Secret: the peer's API server and CA, our certificate
/// and key, the peer's tenant namespace for us as the default namespace, and the proxy to the
/// peer's API server of an in-band peering (`proxyURL`).
pub fn kubeconfig(secret: &Secret) -> Result<Kubeconfig, IdentityError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let get = |key: &'static str| {
        data(secret, key).ok_or(IdentityError::Missing {
            secret: name.clone(),
            key,
        })
    };
    let server = String::from_utf8_lossy(get(keys::API_SERVER_URL)?).into_owned();
    let namespace = String::from_utf8_lossy(get(keys::NAMESPACE)?).into_owned();
    let cert = STANDARD.encode(get(keys::CERTIFICATE)?);
    let key = STANDARD.encode(get(keys::PRIVATE_KEY)?);
    let mut cluster = serde_json::json!({"server": server});
    if let Some(ca) = data(secret, keys::API_SERVER_CA) {
        cluster["certificate-authority-data"] = STANDARD.encode(ca).into();
    }
    // In-band: the peer's API server is reached through its liqo-proxy (HTTP CONNECT), so
    // its certificate still verifies against the API server's own name.
    if let Some(proxy) = data(secret, keys::PROXY_URL).filter(|p| !p.is_empty()) {
        cluster["proxy-url"] = String::from_utf8_lossy(proxy).into_owned().into();
    }
    let value = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "peer", "cluster": cluster}],
        "users": [{"name": "peer", "user": {"client-certificate-data": cert, "client-key-data": key}}],
        "contexts": [{"name": "peer", "context": {"cluster": "peer", "user": "peer", "namespace": namespace}}],
        "current-context": "peer",
    });
    serde_json::from_value(value).map_err(|source| IdentityError::Shape {
        secret: name,
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use kube::{Config, config::KubeConfigOptions};

    use super::*;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("liqo-identity-abc".into()),
                ..Default::default()
            },
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
    fn the_csr_names_our_cluster_and_liqo() {
        let id: ClusterId = "b07938e3-d241-460c-a77b-e286c0f733c7".parse().unwrap();
        let new = new_identity(&id).unwrap();
        assert!(
            new.private_key_pem
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        assert!(
            new.csr_pem
                .starts_with("-----BEGIN CERTIFICATE REQUEST-----")
        );
        // The key never shows in Debug.
        assert!(!format!("{new:?}").contains("PRIVATE KEY"));
        // The subject is in the DER: CN and O as UTF-8 strings.
        let b64: String = new
            .csr_pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let der = STANDARD.decode(b64).unwrap();
        let has = |needle: &[u8]| der.windows(needle.len()).any(|w| w == needle);
        assert!(has(id.as_str().as_bytes()));
        assert!(has(b"liqo.io"));
    }

    #[test]
    fn a_proof_signs_the_message_with_the_identitys_key() {
        use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
        let local: ClusterId = "b07938e3-d241-460c-a77b-e286c0f733c7".parse().unwrap();
        let provider: ClusterId = "3f1e7f52-6b8a-4d4c-9a0f-1c2d3e4f5a6b".parse().unwrap();
        let new = new_identity(&local).unwrap();
        let s = secret(&[
            (keys::PRIVATE_KEY, new.private_key_pem.as_bytes()),
            (keys::CSR, new.csr_pem.as_bytes()),
        ]);
        let p = prove(&s, &provider, 1234).unwrap();
        assert_eq!(p.time_ms, 1234);
        let key = rcgen::KeyPair::from_pem(&new.private_key_pem).unwrap();
        let public = rcgen::PublicKeyData::der_bytes(&key);
        let m = control::identity::proof::message(&provider, new.csr_pem.as_bytes(), 1234);
        // The SPKI's last 65 bytes are the uncompressed P-256 point.
        let point = &public[public.len() - 65..];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, point)
            .verify(&m, &p.signature)
            .unwrap();
        let other = control::identity::proof::message(&local, new.csr_pem.as_bytes(), 1234);
        assert!(
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, point)
                .verify(&other, &p.signature)
                .is_err()
        );
        // Without a key: named.
        let e = prove(&secret(&[(keys::CSR, b"c")]), &provider, 1).unwrap_err();
        assert!(e.to_string().contains("private-key"), "{e}");
    }

    #[test]
    fn kubeconfig_needs_the_signed_fields() {
        let unsigned = secret(&[(keys::PRIVATE_KEY, b"k")]);
        let err = kubeconfig(&unsigned).unwrap_err().to_string();
        assert!(err.contains("apiServerUrl"), "{err}");
        let signed = secret(&[
            (keys::PRIVATE_KEY, b"k"),
            (keys::CERTIFICATE, b"cert"),
            (keys::API_SERVER_URL, b"https://127.0.0.1:6443"),
            (keys::API_SERVER_CA, b"ca"),
            (keys::NAMESPACE, b"liqo-tenant-rome-abcdef"),
        ]);
        let kc = kubeconfig(&signed).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("peer"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Y2E="));
        assert_eq!(cluster.proxy_url, None);
    }

    #[tokio::test]
    async fn an_in_band_identity_reaches_the_api_server_through_the_proxy() {
        let made = rcgen::generate_simple_self_signed(vec!["rome".to_owned()]).unwrap();
        let (cert, key) = (made.cert.pem(), made.signing_key.serialize_pem());
        let signed = secret(&[
            (keys::PRIVATE_KEY, key.as_bytes()),
            (keys::CERTIFICATE, cert.as_bytes()),
            (keys::API_SERVER_URL, b"https://kubernetes.default:443"),
            (keys::NAMESPACE, b"liqo-tenant-rome-abcdef"),
            (keys::PROXY_URL, b"http://10.70.0.4:8118"),
        ]);
        let kc = kubeconfig(&signed).unwrap();
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.proxy_url.as_deref(), Some("http://10.70.0.4:8118"));
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        assert_eq!(
            config
                .proxy_url
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("http://10.70.0.4:8118/")
        );
        // kube is built with its `http-proxy` feature: the client accepts the proxy.
        Client::try_from(config).unwrap();
    }
}

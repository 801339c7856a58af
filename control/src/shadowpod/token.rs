//! Working ServiceAccounts for offloaded pods (issue 29): the remote pod gets a token of its
//! home ServiceAccount (a TokenRequest at home bound to the home pod, written to a Secret in
//! the remote namespace that the pod's `kube-api-access-*` projection reads instead of the
//! provider's token) and the variables locating the API server pointing at the home API server
//! as the provider reaches it ([`home`]). The token is renewed at 80% of its lifetime. Pure:
//! the virtual kubelet requests the token and writes the Secret.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
        core::v1::{Pod, Secret, Volume},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    jiff::{SignedDuration, Timestamp},
};
use kube::Resource;

use crate::api::virtualkubelet::ShadowPod;

pub mod home;

pub use home::{
    API_NAMES, HOST_ENV, HomeApi, InvalidHomeApi, PORT_ENV, SERVICE_PORT, api_endpoint, api_env,
    dial_host, host_aliases, with_api_env,
};

/// The name prefix of the projected volume the ServiceAccount admission adds to a pod.
pub const SERVICE_ACCOUNT_VOLUME_PREFIX: &str = "kube-api-access-";
/// The ServiceAccount of a pod that names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The prefix of a token Secret's name (`liqo-token-<pod>`).
pub const SECRET_PREFIX: &str = "liqo-token-";
/// The token's key in the Secret (the file the projection writes).
pub const TOKEN_KEY: &str = "token";
/// The home namespace's key in the Secret (the projection's `namespace` file).
pub const NAMESPACE_KEY: &str = "namespace";
/// The label naming the home pod a token Secret is for.
pub const POD_LABEL: &str = "liqo.io/token-for-pod";
/// A token's lifetime when the projection names none, or names the kubelet's 3607 s: a
/// pod-bound token asked for 3607 s is one the API server extends to a year
/// (`--service-account-extend-token-expiration`), and these tokens leave for the provider.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The lifetime the API server extends (the kubelet's default projection asks for it).
const EXTENDED_EXPIRATION_SECONDS: i64 = 3607;

/// What a pod's ServiceAccount projection asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenNeed {
    /// The ServiceAccount.
    pub service_account: String,
    /// The token's audience, if the projection names one.
    pub audience: Option<String>,
    /// The lifetime asked for.
    pub expiration_seconds: i64,
}

/// The name of the token Secret of pod `pod` (a long one shortened with a hash: never shared
/// by two pods).
pub fn secret_name(pod: &str) -> String {
    bounded(&format!("{SECRET_PREFIX}{pod}"), 253)
}

/// What the pod's `kube-api-access-*` projection asks for, if it has one with a token.
pub fn need(local: &Pod) -> Option<TokenNeed> {
    let spec = local.spec.as_ref()?;
    let source = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.name.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX))
        .filter_map(|v| v.projected.as_ref()?.sources.as_ref())
        .flatten()
        .find_map(|s| s.service_account_token.as_ref())?;
    Some(TokenNeed {
        service_account: spec
            .service_account_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned()),
        audience: source.audience.clone().filter(|a| !a.is_empty()),
        expiration_seconds: source
            .expiration_seconds
            .filter(|s| *s != EXTENDED_EXPIRATION_SECONDS)
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS),
    })
}

/// The TokenRequest for `local`'s ServiceAccount, bound to the home pod (the token dies with it).
pub fn token_request(local: &Pod, need: &TokenNeed) -> TokenRequest {
    TokenRequest {
        metadata: ObjectMeta::default(),
        spec: TokenRequestSpec {
            audiences: need.audience.iter().cloned().collect(),
            expiration_seconds: Some(need.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: local.metadata.name.clone(),
                uid: local.metadata.uid.clone(),
            }),
        },
        status: None,
    }
}

/// The longest a token goes unrenewed, as the kubelet's own (the API server may extend a
/// pod-bound token's life to a year).
pub const RENEW_AT_MOST_AFTER: SignedDuration = SignedDuration::from_hours(24);

/// When a token issued at `issued` and expiring at `expires` is renewed: at 80% of its life,
/// and within [`RENEW_AT_MOST_AFTER`].
pub fn renew_at(issued: Timestamp, expires: Timestamp) -> Timestamp {
    let life = expires.duration_since(issued);
    let nanos = life.as_nanos().max(0) * 4 / 5;
    let after = SignedDuration::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX));
    issued + after.min(RENEW_AT_MOST_AFTER)
}

/// `text` if it fits `max` characters, else its start and a hash of the whole (stable across
/// processes: FNV-1a), so that two long names stay apart.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("-{hash:016x}");
    let mut head: String = text.chars().take(max - suffix.len()).collect();
    while head.ends_with(['-', '.']) {
        head.pop();
    }
    format!("{head}{suffix}")
}

/// The value of [`POD_LABEL`] for pod `pod` (a label value takes 63 characters).
pub fn pod_label(pod: &str) -> String {
    bounded(pod, 63)
}

/// Whether the remote Secret `existing` is the token Secret of home pod `pod` this peering
/// wrote (`reflection`: its reflection labels, and its pod label): anything else under that
/// name is not ours to overwrite.
pub fn is_token_secret_of(
    existing: &Secret,
    pod: &str,
    reflection: &BTreeMap<String, String>,
) -> bool {
    let Some(labels) = existing.metadata.labels.as_ref() else {
        return false;
    };
    reflection.iter().all(|(k, v)| labels.get(k) == Some(v))
        && labels.get(POD_LABEL) == Some(&pod_label(pod))
}

/// The token Secret of `local` in `remote_namespace`: the token and the home namespace,
/// `labels` (the reflection labels) and the pod's, owned by the ShadowPod (the provider's
/// garbage collector deletes it with the ShadowPod).
pub fn token_secret(
    local: &Pod,
    remote_namespace: &str,
    token: &str,
    shadow_uid: &str,
    mut labels: BTreeMap<String, String>,
) -> Secret {
    let pod = local.metadata.name.clone().unwrap_or_default();
    labels.insert(POD_LABEL.to_owned(), pod_label(&pod));
    let data = BTreeMap::from([
        (TOKEN_KEY.to_owned(), ByteString(token.as_bytes().to_vec())),
        (
            NAMESPACE_KEY.to_owned(),
            ByteString(
                local
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_default()
                    .into_bytes(),
            ),
        ),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&pod)),
            namespace: Some(remote_namespace.to_owned()),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: ShadowPod::api_version(&()).into_owned(),
                kind: ShadowPod::kind(&()).into_owned(),
                name: pod,
                uid: shadow_uid.to_owned(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        type_: Some("Opaque".into()),
        ..Secret::default()
    }
}

/// The `kube-api-access-*` projection rewritten to read the token Secret of `pod`: its token
/// source becomes the Secret's token (same path), its namespace file the Secret's home
/// namespace (the remote namespace's name may differ).
pub fn use_secret(volume: &mut Volume, pod: &str) {
    use k8s_openapi::api::core::v1::{KeyToPath, SecretProjection, VolumeProjection};
    let Some(sources) = volume.projected.as_mut().and_then(|p| p.sources.as_mut()) else {
        return;
    };
    let name = secret_name(pod);
    let secret = |key: &str, path: String| VolumeProjection {
        secret: Some(SecretProjection {
            name: name.clone(),
            items: Some(vec![KeyToPath {
                key: key.to_owned(),
                path,
                mode: None,
            }]),
            optional: Some(false),
        }),
        ..VolumeProjection::default()
    };
    for s in sources.iter_mut() {
        if let Some(t) = &s.service_account_token {
            *s = secret(TOKEN_KEY, t.path.clone());
        } else if let Some(d) = &s.downward_api
            && let Some(item) = d.items.iter().flatten().find(|i| {
                i.field_ref
                    .as_ref()
                    .is_some_and(|f| f.field_path == "metadata.namespace")
            })
        {
            *s = secret(NAMESPACE_KEY, item.path.clone());
        }
    }
}

//! Working ServiceAccounts for offloaded pods (issue 29): the remote pod gets a token of its
//! home ServiceAccount (a TokenRequest at home bound to the home pod, written to a Secret in
//! the remote namespace that the pod's `kube-api-access-*` projection reads instead of the
//! provider's token) and `KUBERNETES_SERVICE_HOST`/`PORT` pointing at the home API server as
//! the provider reaches it. The token is renewed at 80% of its lifetime. Pure: the virtual
//! kubelet requests the token and writes the Secret.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
        core::v1::{EnvVar, Pod, Secret, Volume},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    jiff::{SignedDuration, Timestamp},
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
/// A token's lifetime when the projection names none (the API server's default).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3607;
/// The environment variables that locate the API server.
pub const HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
/// Its port.
pub const PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";

/// The home API server as the provider's pods reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeApi {
    /// Its address (through the tunnel).
    pub host: String,
    /// Its port.
    pub port: u16,
}

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

/// The name of the token Secret of pod `pod` (bounded to a valid name).
pub fn secret_name(pod: &str) -> String {
    let mut name = format!("{SECRET_PREFIX}{pod}");
    name.truncate(253);
    name
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

/// When a token issued at `issued` and expiring at `expires` is renewed: at 80% of its life.
pub fn renew_at(issued: Timestamp, expires: Timestamp) -> Timestamp {
    let life = expires.duration_since(issued);
    let nanos = life.as_nanos().max(0) * 4 / 5;
    issued + SignedDuration::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
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
    labels.insert(POD_LABEL.to_owned(), pod.clone());
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
                api_version: "virtualkubelet.liqo.io/v1alpha1".into(),
                kind: "ShadowPod".into(),
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

/// `env` with the API server variables set to `api` (replacing any).
pub fn with_api_env(env: Option<Vec<EnvVar>>, api: &HomeApi) -> Option<Vec<EnvVar>> {
    let mut env: Vec<EnvVar> = env
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.name != HOST_ENV && e.name != PORT_ENV)
        .collect();
    env.push(EnvVar {
        name: HOST_ENV.into(),
        value: Some(api.host.clone()),
        value_from: None,
    });
    env.push(EnvVar {
        name: PORT_ENV.into(),
        value: Some(api.port.to_string()),
        value_from: None,
    });
    Some(env)
}

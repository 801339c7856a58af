//! The objects Liqo needs on a cluster before its components start, applied with server-side
//! apply by field manager [`MANAGER`]: the namespace, the identity ConfigMap, the chart's CRDs
//! and files, a ServiceAccount per component with its ClusterRoleBinding and token, and the
//! `liqo-auth` Service with its load-balancer status. The webhook configurations are rewritten
//! for the harness by [`Webhooks`] (module `webhooks`).

use std::{
    fs,
    path::{Path, PathBuf},
};

use base64::Engine as _;
use control::consts::{keys, labels, objects, values};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::{ConfigMap, Namespace, Service, ServiceAccount},
    rbac::v1::ClusterRoleBinding,
};
use kube::{
    Api, Client,
    api::{DynamicObject, Patch, PatchParams, PostParams},
    config::Kubeconfig,
    discovery::{self, Scope},
};
use liqo_types::ClusterId;
use serde::{Serialize, de::DeserializeOwned};

use super::{error::LiqoError, webhooks::Webhooks, yaml::documents};
use crate::k8s::{Cluster, MANAGER};

/// The namespace Liqo runs in.
pub const NAMESPACE: &str = control::consts::objects::LIQO_NAMESPACE;

/// How long a component's token is valid: a lab session.
const TOKEN_SECONDS: i64 = 7 * 24 * 3600;

fn typed<T: DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a literal object of its own type")
}

async fn apply<K>(api: &Api<K>, name: &str, obj: &K) -> Result<K, LiqoError>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    K::DynamicType: Default,
{
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map_err(LiqoError::kube(format!(
        "applying {} {name}",
        K::kind(&K::DynamicType::default())
    )))
}

/// The namespace, the identity, the CRDs and the chart's files; returns the cluster ID.
pub(super) async fn prepare(
    client: &Client,
    c: &Cluster,
    chart: &Path,
    hooks: &Webhooks,
) -> Result<String, LiqoError> {
    let ns: Namespace = typed(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {
            "pod-security.kubernetes.io/enforce": "privileged",
        }},
    }));
    apply(&Api::all(client.clone()), NAMESPACE, &ns).await?;
    let id = ensure_identity(client, &c.name).await?;
    crate::k8s::install_crds(client, &chart.join("crds")).await?;
    apply_dir(client, &chart.join("files"), hooks).await?;
    Ok(id)
}

/// A fresh UUIDv4 from the kernel's random source.
pub fn new_cluster_id() -> Result<ClusterId, LiqoError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| LiqoError::Random(e.to_string()))?;
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let text = format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    );
    Ok(text.parse().expect("a UUID is a valid cluster ID"))
}

/// The identity ConfigMap of the cluster named `name` in `liqo`: its cluster ID is kept if it
/// has one, else a fresh UUIDv4; returns the cluster ID.
pub async fn ensure_identity(client: &Client, name: &str) -> Result<String, LiqoError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let existing = api
        .get_opt(objects::CLUSTER_ID_CONFIGMAP)
        .await
        .map_err(LiqoError::kube("reading the identity ConfigMap"))?
        .and_then(|cm| cm.data)
        .and_then(|d| d.get(keys::CLUSTER_ID).cloned())
        .filter(|id| !id.is_empty());
    let id = match existing {
        Some(id) => id,
        None => new_cluster_id()?.to_string(),
    };
    let cm: ConfigMap = typed(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": objects::CLUSTER_ID_CONFIGMAP, "namespace": NAMESPACE,
            "labels": {labels::APP_NAME: values::CLUSTER_ID_CONFIGMAP_APP},
        },
        "data": {keys::CLUSTER_ID: id, keys::CLUSTER_NAME: name},
    }));
    apply(&api, objects::CLUSTER_ID_CONFIGMAP, &cm).await?;
    Ok(id)
}

/// Applies every object of every `*.yaml` in `dir` (several documents per file allowed; a
/// namespaced object without a namespace goes to `liqo`); a missing directory is no object.
/// The webhook configurations are rewritten first ([`Webhooks::rewrite`]).
/// Returns `kind/name` of each.
pub(super) async fn apply_dir(
    client: &Client,
    dir: &Path,
    hooks: &Webhooks,
) -> Result<Vec<String>, LiqoError> {
    let mut files: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(LiqoError::io(dir, e)),
    };
    files.sort();
    let mut done = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).map_err(|e| LiqoError::io(f, e))?;
        for (gvk, mut obj) in documents(f, &text)? {
            hooks.rewrite(&gvk.kind, &mut obj);
            let name = obj.metadata.name.clone().unwrap_or_default();
            let (ar, caps) =
                discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(LiqoError::kube(format!(
                        "finding {} (in {})",
                        gvk.kind,
                        f.display()
                    )))?;
            let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
                let ns = obj.metadata.namespace.as_deref().unwrap_or(NAMESPACE);
                Api::namespaced_with(client.clone(), ns, &ar)
            } else {
                Api::all_with(client.clone(), &ar)
            };
            api.patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&obj),
            )
            .await
            .map_err(LiqoError::kube(format!(
                "applying {} {name} from {}",
                gvk.kind,
                f.display()
            )))?;
            done.push(format!("{}/{name}", gvk.kind));
        }
    }
    Ok(done)
}

/// The cluster's CA (from its kubeconfig), written to `<dir>/ca.crt`.
pub(super) fn write_ca(c: &Cluster, dir: &Path) -> Result<PathBuf, LiqoError> {
    let pem = ca_pem(c)?;
    let path = dir.join("ca.crt");
    fs::write(&path, pem).map_err(|e| LiqoError::io(&path, e))?;
    Ok(path)
}

fn ca_pem(c: &Cluster) -> Result<Vec<u8>, LiqoError> {
    let bad = |problem: String| LiqoError::Chart {
        path: c.kubeconfig.clone(),
        problem,
    };
    let kc = Kubeconfig::read_from(&c.kubeconfig).map_err(|e| bad(e.to_string()))?;
    let data = kc
        .clusters
        .first()
        .and_then(|n| n.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.clone())
        .ok_or_else(|| bad("no certificate-authority-data".into()))?;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| bad(format!("certificate-authority-data: {e}")))
}

/// ServiceAccount `name` in `liqo`, bound by ClusterRoleBinding `name` to ClusterRole `name`,
/// and a kubeconfig (0600) with a fresh token of it: `<dir>/<name>.kubeconfig`, pointing at
/// `server` (default: the cluster's own address; the lab's node-side processes reach the API
/// server through a relay).
pub async fn service_account(
    client: &Client,
    c: &Cluster,
    name: &str,
    dir: &Path,
    server: Option<&str>,
) -> Result<PathBuf, LiqoError> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let sa: ServiceAccount = typed(serde_json::json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": NAMESPACE},
    }));
    apply(&sas, name, &sa).await?;
    let crb: ClusterRoleBinding = typed(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
    }));
    apply(&Api::all(client.clone()), name, &crb).await?;
    token_kubeconfig(client, c, name, dir, server).await
}

/// A kubeconfig (0600, `<dir>/<name>.kubeconfig`) for cluster `c` (at `server`, else its own
/// URL) with a fresh token of the existing ServiceAccount `name` of `liqo` (a TokenRequest,
/// what the kubelet mounts into a pod), namespace `liqo`: a process with it has exactly that
/// ServiceAccount's RBAC.
pub async fn token_kubeconfig(
    client: &Client,
    c: &Cluster,
    name: &str,
    dir: &Path,
    server: Option<&str>,
) -> Result<PathBuf, LiqoError> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let req = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(), // The apiserver's own.
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = sas
        .create_token_request(name, &PostParams::default(), &req)
        .await
        .map_err(LiqoError::kube(format!(
            "requesting a token of ServiceAccount {name}"
        )))?
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| LiqoError::Chart {
            path: dir.to_owned(),
            problem: format!("the TokenRequest of {name} returned no token"),
        })?;
    let kc = crate::k8s::account::kubeconfig(
        &c.name,
        server.unwrap_or(&c.server),
        &ca_pem(c)?,
        name,
        &token,
        Some(NAMESPACE),
    );
    let text = serde_json::to_string_pretty(&kc).expect("JSON of literals");
    let path = dir.join(format!("{name}.kubeconfig"));
    // JSON is YAML: every kubeconfig reader takes it. It holds the token: 0600.
    crate::k8s::write_file(&path, &text, true)?;
    Ok(path)
}

/// Service `liqo-auth` (LoadBalancer, no selector: the process is local) on `port`, and the
/// status a cloud load balancer would write: ingress 127.0.0.1.
pub(super) async fn auth_service(client: &Client, port: u16) -> Result<(), LiqoError> {
    let api: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let name = objects::AUTH_SERVICE;
    let svc: Service = typed(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": "https", "port": port, "targetPort": port, "protocol": "TCP"},
        ]},
    }));
    apply(&api, name, &svc).await?;
    let status =
        serde_json::json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(LiqoError::kube(format!(
            "writing the load-balancer status of {name}"
        )))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_distinct_version_4_uuids() {
        let a = new_cluster_id().unwrap().to_string();
        let b = new_cluster_id().unwrap().to_string();
        assert_ne!(a, b);
        for id in [&a, &b] {
            let parts: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
            assert_eq!(&id[14..15], "4", "{id}");
            assert!("89ab".contains(&id[19..20]), "{id}");
            assert!(
                id.chars()
                    .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
        }
    }
}

//! Acting as a ServiceAccount in a test: the kubeconfig of a token (the one builder; the Liqo
//! install's `token_kubeconfig` writes it to a file), a client from a token, and the Role that
//! lets a ServiceAccount list the pods of its namespace. A token is never logged: the errors
//! name the server, not the kubeconfig.

use base64::Engine as _;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::{
    Api, Client, Config,
    api::{DeleteParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};

use super::{Cluster, K8sError};

/// The name of the Role and RoleBinding [`grant_pod_list`] makes.
pub const POD_READER: &str = "pod-reader";

/// A kubeconfig (JSON, which every kubeconfig reader takes) of one context `cluster`: the API
/// server at `server` trusting the PEM `ca`, user `user` authenticated by `token`, namespace
/// `namespace` if given.
pub fn kubeconfig(
    cluster: &str,
    server: &str,
    ca: &[u8],
    user: &str,
    token: &str,
    namespace: Option<&str>,
) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let mut context = json!({"cluster": cluster, "user": user});
    if let Some(ns) = namespace {
        context["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": context}],
        "current-context": cluster,
    })
}

/// The client configuration of the API server at `server` trusting the PEM `ca`,
/// authenticated by `token` only.
pub async fn config(server: &str, ca: &[u8], token: &str) -> Result<Config, K8sError> {
    let bad =
        |e: &dyn std::fmt::Display| K8sError::Kubeconfig(format!("of a token for {server}: {e}"));
    let kc: Kubeconfig =
        serde_json::from_value(kubeconfig("api", server, ca, "token", token, None))
            .map_err(|e| bad(&e))?;
    Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| bad(&e))
}

/// A client of cluster `c` authenticated by `token` only.
pub async fn client(c: &Cluster, token: &str) -> Result<Client, K8sError> {
    let path = c.ca_crt();
    let ca = std::fs::read(&path).map_err(|e| K8sError::io(&path, e))?;
    Client::try_from(config(&c.server, &ca, token).await?).map_err(K8sError::kube(format!(
        "a client of {} with a token",
        c.name
    )))
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a literal object of its own type")
}

/// Lets ServiceAccount `account` of `namespace` list the pods there: Role and RoleBinding
/// [`POD_READER`] (`client`: an administrator's).
pub async fn grant_pod_list(
    client: &Client,
    namespace: &str,
    account: &str,
) -> Result<(), K8sError> {
    let pp = PostParams::default();
    let what = format!("Role {namespace}/{POD_READER}");
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(
            &pp,
            &typed(json!({"metadata": {"name": POD_READER},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})),
        )
        .await
        .map_err(K8sError::kube(format!("creating {what}")))?;
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(
            &pp,
            &typed(json!({"metadata": {"name": POD_READER},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": POD_READER},
                "subjects": [{"kind": "ServiceAccount", "name": account,
                              "namespace": namespace}]})),
        )
        .await
        .map_err(K8sError::kube(format!(
            "creating the RoleBinding of {what}"
        )))?;
    Ok(())
}

/// Removes what [`grant_pod_list`] made in `namespace`.
pub async fn revoke_pod_list(client: &Client, namespace: &str) -> Result<(), K8sError> {
    let dp = DeleteParams::default();
    let what = format!("{namespace}/{POD_READER}");
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .delete(POD_READER, &dp)
        .await
        .map_err(K8sError::kube(format!("deleting RoleBinding {what}")))?;
    Api::<Role>::namespaced(client.clone(), namespace)
        .delete(POD_READER, &dp)
        .await
        .map_err(K8sError::kube(format!("deleting Role {what}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_kubeconfig_reads_as_the_token_at_the_server() {
        let kc = kubeconfig(
            "home",
            "https://10.0.0.1:6443",
            b"PEM",
            "pod",
            "t0k",
            Some("demo"),
        );
        assert_eq!(kc["contexts"][0]["context"]["namespace"], "demo");
        assert_eq!(
            kc["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
        let kc: Kubeconfig = serde_json::from_value(kc).unwrap();
        assert!(kc.auth_infos[0].auth_info.as_ref().unwrap().token.is_some());
        assert_eq!(
            kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("https://10.0.0.1:6443")
        );
        let bare = kubeconfig("home", "https://h", b"PEM", "pod", "t0k", None);
        assert!(bare["contexts"][0]["context"].get("namespace").is_none());
    }
}

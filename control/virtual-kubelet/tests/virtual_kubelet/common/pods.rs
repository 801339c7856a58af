//! The pods of the reflection tests: local pods bound to the virtual node, the provider's
//! ShadowPod controller played by the test (remote pods on milan's kwok node), status waits.

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, api::DeleteParams};
use serde_json::json;

use control::{api::virtualkubelet::ShadowPod, consts::reflection as consts};

use super::{create, eventually};

/// The virtual node.
pub(crate) const NODE: &str = "liqo-milan";
/// The remote namespace of `demo`.
pub(crate) const REMOTE_NS: &str = "demo-rome";

/// A pod bound to the virtual node, tolerating it (and its taints when it never reports).
pub(crate) fn local_pod(name: &str, ns: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "nginx"}],
                 "tolerations": [
                    {"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}
    })
}

/// What the provider's ShadowPod controller does: a Pod of the ShadowPod's name, labels,
/// annotations and spec (on milan's kwok node), controlled by the ShadowPod.
pub(crate) async fn run_remotely(milan: &Client, name: &str, kwok_node: &str) -> Pod {
    let shadows: Api<ShadowPod> = Api::namespaced(milan.clone(), REMOTE_NS);
    let shadow = shadows.get(name).await.unwrap();
    let mut labels = shadow.metadata.labels.clone().unwrap_or_default();
    labels.insert(
        consts::MANAGED_BY.into(),
        consts::MANAGED_BY_SHADOWPOD.into(),
    );
    let mut spec = serde_json::to_value(&shadow.spec.pod).unwrap();
    spec["nodeName"] = json!(kwok_node);
    let pods: Api<Pod> = Api::namespaced(milan.clone(), REMOTE_NS);
    create(
        &pods,
        json!({
            "metadata": {"name": name, "namespace": REMOTE_NS, "labels": labels,
                "ownerReferences": [{"apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "ShadowPod",
                    "name": name, "uid": shadow.metadata.uid, "controller": true}]},
            "spec": spec
        }),
    )
    .await
}

/// The remote pod's IP once kwok runs it.
pub(crate) async fn remote_ip(milan: &Client, name: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(milan.clone(), REMOTE_NS);
    eventually(60, &format!("remote pod {name} running"), || {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            let s = p.status.unwrap_or_default();
            match (s.phase.as_deref(), s.pod_ip) {
                (Some("Running"), Some(ip)) => Ok(ip),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
}

/// Waits until the local pod's status satisfies `check` (an error naming what differs).
pub(crate) async fn local_status(
    rome: &Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Pod) -> Result<(), String>,
) {
    let pods: Api<Pod> = Api::namespaced(rome.clone(), ns);
    eventually(60, what, || {
        let pods = pods.clone();
        let check = &check;
        async move {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            check(&p)
        }
    })
    .await;
}

pub(crate) fn restart_count(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(-1, |c| c.restart_count)
}

/// Deletes the remote pod now and waits until it is gone (the provider replaces it: the
/// test, here).
pub(crate) async fn kill_remote(milan: &Client, name: &str, kwok_node: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(milan.clone(), REMOTE_NS);
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(60, "remote pod gone", || {
        let pods = pods.clone();
        async move {
            match pods.get_opt(name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
    run_remotely(milan, name, kwok_node).await;
    remote_ip(milan, name).await
}

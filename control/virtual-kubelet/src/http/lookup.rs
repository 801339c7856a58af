//! The lookups logs and exec share: the remote namespace of a local pod's namespace, once the
//! provider's copy of the pod is found to be ours, and the check of the UID an exec path names
//! against the local pod.

use hyper::{Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::{
    common::{Body, relay, text},
    query::Target,
};
use crate::{VkConfig, namespaces};

/// The remote namespace of `t`'s pod, once its copy on the provider is found to be ours (the
/// origin label names the home cluster); otherwise the error response (404 when the namespace
/// is not offloaded or the pod is not ours).
pub(super) async fn remote_namespace(cfg: &VkConfig, t: &Target) -> Result<String, Response<Body>> {
    let remote_ns = match namespaces::remote_namespace(cfg, &t.namespace).await {
        Ok(Some(ns)) => ns,
        Ok(None) => {
            return Err(text(
                StatusCode::NOT_FOUND,
                format!(
                    "namespace {:?} is not offloaded to cluster {}",
                    t.namespace, cfg.foreign.cluster_id
                ),
            ));
        }
        Err(e) => return Err(relay("reading the NamespaceMaps", &e)),
    };
    let pods: Api<Pod> = Api::namespaced(cfg.remote.api.clone(), &remote_ns);
    let pod = match pods.get_opt(&t.pod).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Err(text(
                StatusCode::NOT_FOUND,
                format!(
                    "pod {:?} has no copy in namespace {remote_ns:?} of cluster {}",
                    t.pod, cfg.foreign.cluster_id
                ),
            ));
        }
        Err(e) => return Err(relay("reading the provider's pod", &e)),
    };
    let origin = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(control::consts::labels::OFFLOADED_ORIGIN));
    if origin.map(String::as_str) != Some(cfg.home.cluster_id.as_str()) {
        return Err(text(
            StatusCode::NOT_FOUND,
            format!(
                "pod {:?} in namespace {remote_ns:?} of cluster {} was not offloaded by this cluster",
                t.pod, cfg.foreign.cluster_id
            ),
        ));
    }
    Ok(remote_ns)
}

/// When the path names a UID (`t.uid`), checks that the local pod `t.pod` has it; otherwise
/// the error response: 404 naming both UIDs (a stale exec must not reach a re-created pod of
/// the same name), or the home API server's answer.
pub(super) async fn check_uid(cfg: &VkConfig, t: &Target) -> Result<(), Response<Body>> {
    let Some(want) = t.uid.as_deref() else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(cfg.local.clone(), &t.namespace);
    let have = match pods.get_opt(&t.pod).await {
        Ok(Some(p)) => p.metadata.uid,
        Ok(None) => {
            return Err(text(
                StatusCode::NOT_FOUND,
                format!("pod {:?} not found in namespace {:?}", t.pod, t.namespace),
            ));
        }
        Err(e) => return Err(relay("reading the local pod", &e)),
    };
    if have.as_deref() == Some(want) {
        return Ok(());
    }
    Err(text(
        StatusCode::NOT_FOUND,
        format!(
            "pod {:?} in namespace {:?} has UID {:?}, not the requested {want:?}",
            t.pod,
            t.namespace,
            have.unwrap_or_default()
        ),
    ))
}

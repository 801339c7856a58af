//! `/containerLogs`: the provider's `pods/log` of the same pod, streamed back chunk by chunk
//! (a `follow` lasts until either end closes). Also the lookup shared with exec: the remote
//! namespace of a local one, the check that the provider's pod is ours, and the check of the
//! UID an exec path names against the local pod.
//!
//! Known limit: a `follow` reads the provider through `cfg.remote.watch`, whose read timeout
//! (the peer client's watch timeout, minutes) ends a stream that stays silent longer: a quiet
//! `kubectl logs -f` then ends and must be re-run. Re-opening it with `sinceTime` would need
//! the lines' timestamps (asked of the provider and stripped when the client did not ask),
//! second-precision deduplication and the `limitBytes`/`tailLines` bookkeeping: not done.

use futures::AsyncBufReadExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::{Response, StatusCode, body::Frame};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::{
    Body,
    query::{self, Target},
    text,
};
use crate::{VkConfig, namespaces};

/// How much of the provider's stream one chunk carries at most.
const CHUNK: usize = 32 * 1024;

/// The response of a failed kube call: the provider's (or home's) status and message when it
/// answered, 502 when it could not be reached.
pub(super) fn relay(what: &str, e: &kube::Error) -> Response<Body> {
    match e {
        kube::Error::Api(s) => {
            let status = StatusCode::from_u16(s.code).unwrap_or(StatusCode::BAD_GATEWAY);
            text(status, s.message.clone())
        }
        e => text(StatusCode::BAD_GATEWAY, format!("{what}: {e}")),
    }
}

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

/// Answers `/containerLogs` for `t` with the query `pairs`.
pub(super) async fn handle(
    cfg: &VkConfig,
    t: &Target,
    pairs: &[(String, String)],
) -> Response<Body> {
    let lp = match query::log_params(pairs, &t.container) {
        Ok(lp) => lp,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let remote_ns = match remote_namespace(cfg, t).await {
        Ok(ns) => ns,
        Err(r) => return r,
    };
    // A follow may stay silent for long: the watch client's read timeout is the long one.
    let client = if lp.follow {
        cfg.remote.watch.clone()
    } else {
        cfg.remote.api.clone()
    };
    let pods: Api<Pod> = Api::namespaced(client, &remote_ns);
    let reader = match pods.log_stream(&t.pod, &lp).await {
        Ok(r) => r,
        Err(e) => return relay("reading the provider's log", &e),
    };
    // The reader until its end or its first error (which ends the body, cutting the response).
    let chunks = futures::stream::unfold(Some(Box::pin(reader)), |r| async move {
        let mut r = r?;
        let (chunk, n) = match r.fill_buf().await {
            Ok([]) => return None,
            Ok(buf) => {
                let n = buf.len().min(CHUNK);
                (hyper::body::Bytes::copy_from_slice(&buf[..n]), n)
            }
            Err(e) => return Some((Err(e), None)),
        };
        r.consume_unpin(n);
        Some((Ok(Frame::data(chunk)), Some(r)))
    });
    let mut resp = Response::new(StreamBody::new(chunks).boxed_unsync());
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    resp
}

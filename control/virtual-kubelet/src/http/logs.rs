//! `/containerLogs`: the provider's `pods/log` of the same pod (found by [`super::lookup`]),
//! streamed back chunk by chunk (a `follow` lasts until either end closes).
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
    common::{Body, relay, text},
    lookup::remote_namespace,
    query::{self, Target},
};
use crate::VkConfig;

/// How much of the provider's stream one chunk carries at most.
const CHUNK: usize = 32 * 1024;

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

//! What the kubelet API's handlers share: the response body, the plain-text response and
//! the response of a failed kube call, and the set of a connection's exec bridges.

use std::sync::Arc;

use http_body_util::{BodyExt as _, Full, combinators::UnsyncBoxBody};
use hyper::{Response, StatusCode, body::Bytes};
use tokio::task::JoinSet;

/// A response body: whole or streamed.
pub(super) type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// A plain-text response.
pub(super) fn text(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(msg.into()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

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

/// The tasks of one connection's upgraded streams (its exec bridge): owned by the connection's
/// task, aborted with it.
pub(super) type Bridges = Arc<std::sync::Mutex<JoinSet<()>>>;

/// The set of `bridges`, locked (a panic while it was held left it usable: it is only ever
/// spawned into or taken).
pub(super) fn lock(bridges: &Bridges) -> std::sync::MutexGuard<'_, JoinSet<()>> {
    bridges
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

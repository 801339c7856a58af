//! The webhooks' HTTP side: the router (`POST /mutate/pod`, `POST /validate/namespace-offloading`)
//! with a body limit and a timeout per request, answering AdmissionReviews with
//! `control::offloading::webhook::review`'s decisions, and counting reviews by webhook and
//! outcome. The serving loop (TLS, connections) is `liqo_auth::https`'s; the NamespaceOffloading
//! of a pod's namespace comes from a [`Lookup`], so the routing is testable without an apiserver.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::post,
};
use control::{
    api::{discovery::ClusterIdentity, offloading::NamespaceOffloading},
    consts::webhook,
    offloading::webhook::review::{self, AdmissionReview, Answer},
};

use crate::metrics::Metrics;

/// What a [`Lookup`] answers: the NamespaceOffloading `offloading` of a namespace, `None` when
/// there is none, or why it cannot be read.
pub type Looked = Result<Option<NamespaceOffloading>, String>;

/// Reads the NamespaceOffloading `offloading` of a namespace.
pub type Lookup =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = Looked> + Send>> + Send + Sync + 'static>;

/// The router's state.
#[derive(Clone)]
pub struct Webhooks {
    /// The local identity (the NamespaceOffloading validation refuses it as a cluster).
    pub local: ClusterIdentity,
    /// The pod webhook's NamespaceOffloading lookup.
    pub lookup: Lookup,
    /// Where reviews are counted.
    pub metrics: Metrics,
    /// The largest body (bytes); larger is answered 413.
    pub max_body: usize,
    /// How long a review may take; longer is answered 503.
    pub timeout: Duration,
}

/// The router of the two webhooks.
pub fn router(hooks: Webhooks) -> Router {
    let max_body = hooks.max_body;
    let state = Arc::new(hooks);
    Router::new()
        .route(webhook::POD_PATH, post(pod))
        .route(webhook::NSOFF_PATH, post(nsoff))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(state.clone(), timeout))
        .with_state(state)
}

fn name_of(path: &str) -> &'static str {
    match path {
        webhook::POD_PATH => webhook::POD_WEBHOOK,
        webhook::NSOFF_PATH => webhook::NSOFF_WEBHOOK,
        _ => "other",
    }
}

async fn timeout(State(state): State<Arc<Webhooks>>, request: Request, next: Next) -> Response {
    let name = name_of(request.uri().path());
    match tokio::time::timeout(state.timeout, next.run(request)).await {
        Ok(response) => {
            if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                state.metrics.review(name, "too_large");
            }
            response
        }
        Err(_elapsed) => {
            state.metrics.review(name, "timeout");
            tracing::warn!(
                webhook = name,
                "review not answered within {:?}",
                state.timeout
            );
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("review not answered within {:?}\n", state.timeout),
            )
                .into_response()
        }
    }
}

/// The outcome label of an answered review.
fn outcome(r: &AdmissionReview) -> &'static str {
    match &r.response {
        Some(resp) if resp.allowed && resp.patch.is_some() => "patched",
        Some(resp) if resp.allowed && !resp.warnings.is_empty() => "warned",
        Some(resp) if resp.allowed => "allowed",
        Some(resp) if resp.status.as_ref().is_some_and(|s| s.code == 403) => "denied",
        _ => "error",
    }
}

fn answer(state: &Webhooks, name: &'static str, r: AdmissionReview) -> Response {
    state.metrics.review(name, outcome(&r));
    match serde_json::to_vec(&r) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn bad_body(state: &Webhooks, name: &'static str, e: review::ReviewError) -> Response {
    state.metrics.review(name, "bad_request");
    (StatusCode::BAD_REQUEST, liqo_types::chain(&e) + "\n").into_response()
}

async fn pod(State(state): State<Arc<Webhooks>>, body: Bytes) -> Response {
    let name = webhook::POD_WEBHOOK;
    let req = match review::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_body(&state, name, e),
    };
    let namespace = req.namespace.clone().unwrap_or_default();
    let r = match (state.lookup)(namespace.clone()).await {
        Ok(nsoff) => review::mutate_pod(&req, nsoff.as_ref()),
        Err(e) => review::review_response(
            &req.uid,
            Answer::Error {
                code: 500,
                message: format!(
                    "failed retrieving the NamespaceOffloading of namespace {namespace:?}: {e}"
                ),
            },
        ),
    };
    answer(&state, name, r)
}

async fn nsoff(State(state): State<Arc<Webhooks>>, body: Bytes) -> Response {
    let name = webhook::NSOFF_WEBHOOK;
    match review::decode(&body) {
        Ok(req) => {
            let r = review::validate_nsoff(&req, &state.local);
            answer(&state, name, r)
        }
        Err(e) => bad_body(&state, name, e),
    }
}

#[cfg(test)]
mod tests;

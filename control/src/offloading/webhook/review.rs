//! The AdmissionReview (`admission.k8s.io/v1`) wire format of the two webhooks, as pure
//! functions from a decoded request to the review to send back: [`mutate_pod`] (a JSON patch,
//! RFC 6902, touching only `spec.tolerations` and `spec.affinity`) and [`validate_nsoff`].
//!
//! It never reads a socket or the NamespaceOffloading itself: the server decodes the body
//! ([`decode`]), looks the NamespaceOffloading up, and encodes what these return.

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Operation, Verdict, mutate, validate};
use crate::{
    api::{
        discovery::ClusterIdentity,
        offloading::{self as api, NamespaceOffloading},
    },
    consts::offloading::SCHEDULING_ENABLED,
};

/// The API version of the reviews.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The kind of the reviews.
pub const KIND: &str = "AdmissionReview";

/// An AdmissionReview, as received (with `request`) or sent (with `response`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    /// `admission.k8s.io/v1`.
    pub api_version: String,
    /// `AdmissionReview`.
    pub kind: String,
    /// What the apiserver asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<AdmissionRequest>,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<AdmissionResponse>,
}

/// The fields of `request` the webhooks read (others are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Copied into the response.
    pub uid: String,
    /// CREATE, UPDATE, ...
    pub operation: Operation,
    /// The object's namespace (authoritative: a pod's own may be unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The object as it will be stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The stored object, on UPDATE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
}

/// `response`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Admitted or not.
    pub allowed: bool,
    /// Why not (a metav1 Status: code and message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// `JSONPatch` when `patch` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// The base64 of the JSON patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Shown to the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The metav1 Status of a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseStatus {
    /// The HTTP code the apiserver reports (403 denied, 400 bad request, 500 failure).
    pub code: u16,
    /// `Forbidden` for a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The message shown after `admission webhook "<name>" denied the request: `.
    pub message: String,
}

/// A body that is not a review with a request.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not a JSON AdmissionReview.
    #[error("the body is not an AdmissionReview")]
    NotAReview(#[source] serde_json::Error),
    /// A review without `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

/// Decodes a request body.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    let review: AdmissionReview = serde_json::from_slice(body).map_err(ReviewError::NotAReview)?;
    review.request.ok_or(ReviewError::NoRequest)
}

/// What a webhook answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A validation's verdict.
    Verdict(Verdict),
    /// Admitted with these JSON patch operations (none: admitted unchanged).
    Patch(Vec<Value>),
    /// Failed to decide: refused with this code (the failure policy applies only when the
    /// webhook cannot be called, not to this answer).
    Error {
        /// 400 for an undecodable object, 500 for a failed lookup.
        code: u16,
        /// Why.
        message: String,
    },
}

/// The review answering request `uid`.
pub fn review_response(uid: &str, answer: Answer) -> AdmissionReview {
    let mut response = AdmissionResponse {
        uid: uid.to_owned(),
        allowed: true,
        status: None,
        patch_type: None,
        patch: None,
        warnings: vec![],
    };
    match answer {
        Answer::Verdict(Verdict::Allow { warnings }) => response.warnings = warnings,
        Answer::Verdict(Verdict::Deny { message }) => {
            response.allowed = false;
            response.status = Some(ResponseStatus {
                code: 403,
                reason: Some("Forbidden".to_owned()),
                message,
            });
        }
        Answer::Patch(ops) if ops.is_empty() => {}
        Answer::Patch(ops) => {
            let bytes = serde_json::to_vec(&ops).expect("JSON values always serialize");
            response.patch_type = Some("JSONPatch".to_owned());
            response.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        Answer::Error { code, message } => {
            response.allowed = false;
            response.status = Some(ResponseStatus {
                code,
                reason: None,
                message,
            });
        }
    }
    AdmissionReview {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        request: None,
        response: Some(response),
    }
}

fn add(path: &str, value: impl Serialize) -> Value {
    let value = serde_json::to_value(value).expect("Kubernetes types always serialize");
    json!({"op": "add", "path": path, "value": value})
}

/// The JSON patch from `before` to `after` for the two fields [`mutate`] changes: new
/// tolerations are appended (`/spec/tolerations/-`, or the whole list when there was none),
/// the affinity is set at the shallowest level that was missing, or the required node
/// affinity replaced (`add` on an existing member replaces it, RFC 6902 §4.1).
pub fn pod_patch(before: &PodSpec, after: &PodSpec) -> Vec<Value> {
    let mut ops = vec![];
    if before.tolerations != after.tolerations {
        match (&before.tolerations, &after.tolerations) {
            (Some(b), Some(a)) if a.starts_with(b) => {
                ops.extend(a[b.len()..].iter().map(|t| add("/spec/tolerations/-", t)));
            }
            (_, a) => ops.push(add("/spec/tolerations", a)),
        }
    }
    if before.affinity != after.affinity {
        let node = |s: &PodSpec| s.affinity.as_ref().and_then(|a| a.node_affinity.clone());
        match (&before.affinity, node(before), node(after)) {
            (None, _, _) | (_, _, None) => ops.push(add("/spec/affinity", &after.affinity)),
            (Some(_), None, Some(a)) => ops.push(add("/spec/affinity/nodeAffinity", a)),
            (Some(_), Some(_), Some(a)) => ops.push(add(
                "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                a.required_during_scheduling_ignored_during_execution,
            )),
        }
    }
    ops
}

/// The pod webhook: the pod in `req` mutated for `nsoff`, the NamespaceOffloading of the
/// request's namespace (`None` when it has none: refused with 500, upstream's message
/// prefix kept, as a pod there must not escape the policy).
pub fn mutate_pod(req: &AdmissionRequest, nsoff: Option<&NamespaceOffloading>) -> AdmissionReview {
    let answer = |a| review_response(&req.uid, a);
    let namespace = req.namespace.as_deref().unwrap_or_default();
    let Some(nsoff) = nsoff else {
        return answer(Answer::Error {
            code: 500,
            message: format!(
                "failed retrieving NamespaceOffloading: namespace {namespace:?} is labelled \
                 {SCHEDULING_ENABLED}=true but has no NamespaceOffloading {:?}",
                api::NAME
            ),
        });
    };
    let pod: Pod = match req.object.clone().map(serde_json::from_value).transpose() {
        Ok(Some(pod)) => pod,
        Ok(None) => return answer(bad_request("the request has no pod")),
        Err(e) => return answer(bad_request(&format!("cannot decode the pod: {e}"))),
    };
    let before = pod.spec.unwrap_or_default();
    let after = mutate(&nsoff.spec, &before);
    answer(Answer::Patch(pod_patch(&before, &after)))
}

fn bad_request(message: &str) -> Answer {
    Answer::Error {
        code: 400,
        message: message.to_owned(),
    }
}

/// The NamespaceOffloading validating webhook on a request ([`validate`]); the request's
/// namespace fills the object's when unset. DELETE and CONNECT are allowed.
pub fn validate_nsoff(req: &AdmissionRequest, local: &ClusterIdentity) -> AdmissionReview {
    let answer = |a| review_response(&req.uid, a);
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return answer(Answer::Verdict(Verdict::Allow { warnings: vec![] }));
    }
    let decode = |v: &Option<Value>| -> Result<Option<NamespaceOffloading>, String> {
        let mut o: Option<NamespaceOffloading> = v
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| format!("cannot decode the NamespaceOffloading: {e}"))?;
        if let Some(o) = &mut o
            && o.metadata.namespace.is_none()
        {
            o.metadata.namespace.clone_from(&req.namespace);
        }
        Ok(o)
    };
    let (new, old) = match (decode(&req.object), decode(&req.old_object)) {
        (Ok(Some(new)), Ok(old)) => (new, old),
        (Ok(None), _) => return answer(bad_request("the request has no NamespaceOffloading")),
        (Err(e), _) | (_, Err(e)) => return answer(bad_request(&e)),
    };
    answer(Answer::Verdict(validate(
        req.operation,
        &new,
        old.as_ref(),
        local,
    )))
}

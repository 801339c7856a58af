//! The local pod's status write (`Action::WriteStatus`): a merge patch of what differs, with
//! the `liqo.io/shadowPod` label when it is due. A label the home API server refuses (an
//! admission policy, say) never holds the status back: the status is written again without
//! it, and the label goes in a write of its own once its ShadowPod is
//! `control::shadowpod::reflection::LABEL_AFTER` old.

use control::{
    consts::{labels, reflection::FIELD_MANAGER, values},
    shadowpod::reflection as decide,
};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::key::Key;

/// What the write left on the pod.
pub(super) struct Written {
    /// The pod as written.
    pub(super) pod: Pod,
    /// The label went with it.
    pub(super) labelled: bool,
}

/// Writes `status` over `current` on the pod `key`, labelled too with `label`.
pub(super) async fn write(
    api: &Api<Pod>,
    key: &Key,
    current: &PodStatus,
    status: &PodStatus,
    label: bool,
) -> Result<Written, kube::Error> {
    match patch(api, key, current, status, label).await {
        Err(kube::Error::Api(e)) if label && refused(e.code) => {
            tracing::warn!(
                pod = %key, code = e.code, reason = %e.reason, message = %e.message,
                "the status write carrying the liqo.io/shadowPod label was refused: the status is \
                 written without it, the label alone later"
            );
            let pod = patch(api, key, current, status, false).await?;
            Ok(Written {
                pod,
                labelled: false,
            })
        }
        other => Ok(Written {
            pod: other?,
            labelled: label,
        }),
    }
}

async fn patch(
    api: &Api<Pod>,
    key: &Key,
    current: &PodStatus,
    status: &PodStatus,
    label: bool,
) -> Result<Pod, kube::Error> {
    let mut patch = json!({ "status": decide::status_patch(current, status) });
    if label {
        patch["metadata"] = json!({"labels": {labels::SHADOW_POD: values::TRUE}});
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch_status(&key.name, &params, &Patch::Merge(patch))
        .await
}

/// Whether an API error refuses the request's content (a bad request, a policy, an invalid
/// object), rather than the pod being gone, a conflict, a rate limit or the server failing.
fn refused(code: u16) -> bool {
    matches!(code, 400 | 403 | 422)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_refusal_of_the_content_writes_again_without_the_label() {
        for code in [400, 403, 422] {
            assert!(super::refused(code), "{code}");
        }
        for code in [404, 409, 429, 500, 503] {
            assert!(!super::refused(code), "{code}");
        }
    }
}

//! A home cluster whose admission refuses the `liqo.io/shadowPod` label on a pod's status
//! (a ValidatingAdmissionPolicy on `pods/status`, as an operator may have): the status of an
//! offloaded pod still comes back, written again without the label
//! (`reflection/status_write.rs`). Run on the reflection test's clusters, with its running
//! reflection; the policy selects only the pods labelled [`GUARDED`].

use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    core::v1::Pod,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::common::{
    create, eventually,
    pods::{local_pod, local_status, remote_ip, run_remotely},
};

/// The label of the pods the policy guards.
const GUARDED: &str = "liqo-test/refuses-shadow-label";
const POLICY: &str = "refuse-shadow-pod-label";
const LABEL: &str = "liqo.io/shadowPod";

/// The policy and its binding, then a pod offloaded under it: Running with its remote IP,
/// never labelled by a status write.
pub(crate) async fn check(rome: &Client, milan: &Client, kwok_node: &str) {
    let pp = PostParams::default();
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "objectSelector": {"matchLabels": {GUARDED: "true"}},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["UPDATE"], "resources": ["pods/status"]}],
            },
            "validations": [{
                "expression": format!(
                    "!(has(object.metadata.labels) && '{LABEL}' in object.metadata.labels) || \
                     (has(oldObject.metadata.labels) && '{LABEL}' in oldObject.metadata.labels)"
                ),
                "message": format!("the {LABEL} label is not written with a status here"),
                "reason": "Forbidden",
            }],
        },
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicy>::all(rome.clone())
        .create(&pp, &policy)
        .await
        .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": POLICY},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(rome.clone())
        .create(&pp, &binding)
        .await
        .unwrap();

    // The policy in force (the API server loads it a moment later): a pod of rome's own node
    // (kwok writes its status, never the label), whose status the test labels, is refused.
    let pods: Api<Pod> = Api::namespaced(rome.clone(), "demo");
    let mut probe = local_pod("label-probe", "demo");
    probe["metadata"]["labels"][GUARDED] = json!("true");
    // Not the virtual node's: the reflection leaves it alone.
    probe["spec"]["nodeName"] = json!(null);
    create(&pods, probe).await;
    eventually(60, "the policy refusing the label on a status", || {
        let pods = pods.clone();
        async move {
            let labelled = json!({"metadata": {"labels": {LABEL: "true"}},
                                  "status": {"message": "probe"}});
            match pods
                .patch_status(
                    "label-probe",
                    &PatchParams::default(),
                    &Patch::Merge(labelled),
                )
                .await
            {
                Err(kube::Error::Api(e)) if e.message.contains(LABEL) => Ok(()),
                other => {
                    // Written: the policy was not loaded yet; the label goes for the next try.
                    let unlabel = json!({"metadata": {"labels": {LABEL: null}}});
                    pods.patch(
                        "label-probe",
                        &PatchParams::default(),
                        &Patch::Merge(unlabel),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                    Err(format!("{:?}", other.map(|_| "written")))
                }
            }
        }
    })
    .await;

    // An offloaded pod under the policy: its status comes back all the same, unlabelled.
    let mut guarded = local_pod("guarded", "demo");
    guarded["metadata"]["labels"][GUARDED] = json!("true");
    create(&pods, guarded).await;
    eventually(60, "ShadowPod guarded", || {
        let shadows = Api::<control::api::virtualkubelet::ShadowPod>::namespaced(
            milan.clone(),
            crate::common::pods::REMOTE_NS,
        );
        async move {
            shadows
                .get("guarded")
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
    })
    .await;
    run_remotely(milan, "guarded", kwok_node).await;
    let ip = remote_ip(milan, "guarded").await;
    local_status(
        rome,
        "demo",
        "guarded",
        "guarded Running, unlabelled",
        |p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            assert!(
                !labels.contains_key(LABEL),
                "labelled despite the policy: {labels:?}"
            );
            let s = p.status.clone().unwrap_or_default();
            (s.phase.as_deref() == Some("Running") && s.pod_ip.as_deref() == Some(ip.as_str()))
                .then_some(())
                .ok_or(format!("phase {:?} podIP {:?}", s.phase, s.pod_ip))
        },
    )
    .await;
    for name in ["guarded", "label-probe"] {
        pods.delete(name, &Default::default()).await.unwrap();
    }
    Api::<ValidatingAdmissionPolicyBinding>::all(rome.clone())
        .delete(POLICY, &Default::default())
        .await
        .unwrap();
    Api::<ValidatingAdmissionPolicy>::all(rome.clone())
        .delete(POLICY, &Default::default())
        .await
        .unwrap();
}

//! The ShadowPod controller's decision and the pod it makes.

use super::*;

fn shadow(deleting: bool) -> ShadowPod {
    let mut s: ShadowPod = serde_json::from_value(serde_json::json!({
        "apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "ShadowPod",
        "metadata": {"name": "web-1", "namespace": "demo-rome", "uid": "sp-uid",
            "labels": {"app": "web", "virtualkubelet.liqo.io/origin": "rome"},
            "annotations": {"note": "x"}},
        "spec": {"pod": {"containers": [{"name": "c", "image": "nginx:1"}], "restartPolicy": "Always"}},
    }))
    .unwrap();
    if deleting {
        s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    }
    s
}

#[test]
fn a_missing_pod_is_created_with_labels_annotations_spec_and_controller() {
    let s = shadow(false);
    assert_eq!(decide(&s, None::<&Pod>), Action::Create);
    let (p, _) = made(&s).unwrap();
    assert_eq!(p.metadata.name.as_deref(), Some("web-1"));
    assert_eq!(p.metadata.namespace.as_deref(), Some("demo-rome"));
    let labels = p.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "web");
    assert_eq!(labels["virtualkubelet.liqo.io/origin"], "rome");
    assert_eq!(labels[reflection::MANAGED_BY], "shadowpod");
    assert_eq!(p.metadata.annotations.clone().unwrap()["note"], "x");
    let spec = p.spec.clone().unwrap();
    assert_eq!(spec.containers, s.spec.pod.containers);
    assert_eq!(spec.restart_policy, s.spec.pod.restart_policy);
    assert_eq!(spec.host_network, Some(false));
    let o = &p.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (
            o.kind.as_str(),
            o.name.as_str(),
            o.uid.as_str(),
            o.api_version.as_str()
        ),
        (
            "ShadowPod",
            "web-1",
            "sp-uid",
            "virtualkubelet.liqo.io/v1alpha1"
        )
    );
    assert_eq!(
        (o.controller, o.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert!(controlled_by(&p, "sp-uid"));
    assert!(!controlled_by(&p, "other"));
    assert_eq!(pods_selector(), "liqo.io/managed-by=shadowpod");
}

#[test]
fn an_existing_pod_is_never_updated_and_a_foreign_one_only_warned_about() {
    let s = shadow(false);
    assert_eq!(decide(&s, None::<&Pod>), Action::Create);
    let (mut mine, _) = made(&s).unwrap();
    mine.spec.as_mut().unwrap().containers[0].image = Some("old".into());
    assert_eq!(decide(&s, Some(&mine)), Action::Nothing);
    let mut foreign = mine.clone();
    foreign.metadata.owner_references = None;
    let Action::Warn(reason, message) = decide(&s, Some(&foreign)) else {
        panic!("warning expected");
    };
    assert_eq!(reason, FOREIGN_POD);
    assert!(message.contains("demo-rome/web-1"), "{message}");
    // Another ShadowPod of that name (an earlier UID) does not control it either.
    let mut earlier = mine.clone();
    earlier.metadata.owner_references.as_mut().unwrap()[0].uid = "sp-old".into();
    assert!(matches!(decide(&s, Some(&earlier)), Action::Warn(..)));
}

#[test]
fn a_terminating_pod_is_waited_for() {
    let s = shadow(false);
    assert_eq!(decide(&s, None::<&Pod>), Action::Create);
    let (mut p, _) = made(&s).unwrap();
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    assert_eq!(decide(&s, Some(&p)), Action::Again(TERMINATING_AGAIN));
    p.metadata.owner_references = None;
    assert_eq!(decide(&s, Some(&p)), Action::Again(TERMINATING_AGAIN));
}

#[test]
fn the_pod_of_a_deleted_shadowpod_is_deleted_once_and_no_other() {
    let s = shadow(false);
    let (mut p, _) = made(&s).unwrap();
    p.metadata.uid = Some("pod-uid".into());
    p.metadata.resource_version = Some("7".into());
    let doomed = Doomed {
        uid: "pod-uid".into(),
        resource_version: Some("7".into()),
    };
    // Gone (the watch's Delete): its pod, as seen.
    assert_eq!(reap("sp-uid", Some(&p)), Some(doomed.clone()));
    // Being deleted (a foreground deletion, a finalizer): the same, from the decision.
    assert_eq!(decide(&shadow(true), Some(&p)), Action::Reap(doomed));
    assert_eq!(decide(&shadow(true), None::<&Pod>), Action::Nothing);
    assert_eq!(reap("sp-uid", None::<&Pod>), None);
    // Deleted with `--cascade=orphan`: its pod is kept.
    let mut orphaning = shadow(true);
    orphaning.metadata.finalizers = Some(vec!["orphan".into()]);
    assert_eq!(decide(&orphaning, Some(&p)), Action::Nothing);
    // Another ShadowPod's pod (a later one of the same name), or one it does not control
    // (orphaned: the garbage collector removed its owner).
    assert_eq!(reap("sp-old", Some(&p)), None);
    assert_eq!(reap("", Some(&p)), None);
    let mut foreign = p.clone();
    foreign.metadata.owner_references = None;
    assert_eq!(reap("sp-uid", Some(&foreign)), None);
    assert_eq!(decide(&shadow(true), Some(&foreign)), Action::Nothing);
    // Already going: not deleted again.
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    assert_eq!(reap("sp-uid", Some(&p)), None);
    assert_eq!(decide(&shadow(true), Some(&p)), Action::Nothing);
}

#[test]
fn what_would_reach_past_the_namespace_is_removed_and_named() {
    let mut s = shadow(false);
    s.spec.pod = serde_json::from_value(serde_json::json!({
        "containers": [{"name": "c", "image": "nginx:1"}],
        "hostNetwork": true, "hostPID": true, "hostIPC": false, "nodeName": "provider-node-0",
        "nodeSelector": {"k": "v"}, "schedulerName": "other", "priorityClassName": "system-node-critical",
        "priority": 2000001000, "automountServiceAccountToken": true, "serviceAccountName": "app",
    }))
    .unwrap();
    assert_eq!(decide(&s, None::<&Pod>), Action::Create);
    let (p, removed) = made(&s).unwrap();
    assert_eq!(
        removed,
        [
            "hostNetwork",
            "hostPID",
            "nodeName",
            "nodeSelector",
            "schedulerName",
            "priority",
            "priorityClassName",
            "automountServiceAccountToken"
        ]
    );
    let spec = p.spec.unwrap();
    assert_eq!(
        (spec.host_network, spec.host_pid, spec.host_ipc),
        (Some(false), Some(false), Some(false))
    );
    assert!(spec.node_name.is_none() && spec.node_selector.is_none());
    assert!(spec.scheduler_name.is_none() && spec.priority_class_name.is_none());
    assert!(spec.priority.is_none());
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.service_account_name.as_deref(), Some("app"), "kept");
    // A spec asking for nothing of that: nothing named.
    let (_, none) = confine(&shadow(false).spec.pod);
    assert!(none.is_empty(), "{none:?}");
}

#[test]
fn the_decision_needs_only_the_metadata_and_the_digest_stays_with_the_shadowpod() {
    let mut s = shadow(false);
    s.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(reflection::SHADOW_DIGEST.into(), "d".into());
    let meta = kube::api::PartialObjectMeta::<ShadowPod> {
        types: None,
        metadata: s.metadata.clone(),
        _phantom: Default::default(),
    };
    assert_eq!(decide(&meta, None::<&Pod>), Action::Create);
    let (p, _) = made(&s).unwrap();
    let annotations = p.metadata.annotations.unwrap();
    assert_eq!(annotations["note"], "x");
    assert!(!annotations.contains_key(reflection::SHADOW_DIGEST));
    // Without a UID (never from the API server) nothing is made.
    let mut nameless = meta.clone();
    nameless.metadata.uid = None;
    assert_eq!(decide(&nameless, None::<&Pod>), Action::Nothing);
}

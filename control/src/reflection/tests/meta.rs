//! [`meta`](crate::reflection::meta): the opt-out annotation, the copies never reflected
//! back, and the metadata every copy carries.

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use serde_json::json;

use super::fixture::{DESTINATION, FOREIGN, HOME, ORIGIN, OTHER, assert_copy_meta, ids, obj};
use crate::reflection::{Skip, meta};

fn meta_with(annotations: serde_json::Value, labels: serde_json::Value) -> ObjectMeta {
    obj(json!({"name": "settings", "namespace": "demo",
               "annotations": annotations, "labels": labels}))
}

#[test]
fn skip_without_annotation_is_none() {
    assert_eq!(meta::skip(&meta_with(json!({}), json!({}))), None);
    assert_eq!(meta::skip(&ObjectMeta::default()), None);
    let unrelated = meta_with(json!({"liqo.io/other": "true"}), json!({"app": "web"}));
    assert_eq!(meta::skip(&unrelated), None);
}

#[test]
fn skip_reflection_true_is_excluded() {
    let m = meta_with(json!({"liqo.io/skip-reflection": "true"}), json!({}));
    assert!(
        matches!(meta::skip(&m), Some(Skip::Excluded(_))),
        "{:?}",
        meta::skip(&m)
    );
}

#[test]
fn skip_reflection_false_is_none() {
    let m = meta_with(json!({"liqo.io/skip-reflection": "false"}), json!({}));
    assert_eq!(meta::skip(&m), None);
}

#[test]
fn skip_reflection_bad_value_is_refused_naming_annotation_and_value() {
    for bad in ["yes", "on"] {
        let m = meta_with(json!({"liqo.io/skip-reflection": bad}), json!({}));
        match meta::skip(&m) {
            Some(Skip::Refused(e)) => {
                assert_eq!(e.field, "metadata.annotations[liqo.io/skip-reflection]");
                assert!(
                    e.problem.contains(&format!("{bad:?}")),
                    "{bad}: {}",
                    e.problem
                );
            }
            other => panic!("{bad:?}: expected Refused, got {other:?}"),
        }
    }
}

#[test]
fn a_copy_reflected_here_is_excluded() {
    // Reflected here by the provider (bidirectional peering), or by any other cluster.
    for origin in [FOREIGN, OTHER, HOME] {
        let m = meta_with(json!({}), json!({ORIGIN: origin, DESTINATION: HOME}));
        assert!(
            matches!(meta::skip(&m), Some(Skip::Excluded(_))),
            "{origin}"
        );
    }
    // The origin label alone is enough.
    let m = meta_with(json!({}), json!({ORIGIN: FOREIGN}));
    assert!(matches!(meta::skip(&m), Some(Skip::Excluded(_))));
}

#[test]
fn remote_meta_keeps_labels_and_annotations_and_drops_server_fields() {
    let ids = ids();
    let local: ConfigMap = obj(json!({
        "metadata": {
            "name": "settings", "namespace": "demo", "uid": "u-local", "resourceVersion": "9",
            "creationTimestamp": "2026-03-04T05:06:07Z", "generation": 3,
            "labels": {"app": "web"}, "annotations": {"note": "kept"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-p"}],
            "finalizers": ["example.com/keep"]
        }
    }));
    let m = meta::remote(&local.metadata, "copy".into(), &ids.ctx(), []);
    assert_copy_meta(&m, "copy");
    assert_eq!(m.labels.as_ref().unwrap().get("app").unwrap(), "web");
    assert_eq!(m.labels.as_ref().unwrap().len(), 3);
    assert_eq!(
        serde_json::to_value(&m.annotations).unwrap(),
        json!({"note": "kept", "reflection.liqo.io/local-uid": "u-local"})
    );
    assert_eq!(m.finalizers, None);
    assert_eq!(m.generation, None);
}

#[test]
fn remote_meta_reflection_labels_override_local_ones_and_extra_overrides_all() {
    let ids = ids();
    // A local object cannot forge the labels that make a copy ours.
    let local = meta_with(json!({}), json!({DESTINATION: OTHER, "k": "local"}));
    let m = meta::remote(
        &local,
        "x".into(),
        &ids.ctx(),
        [("k".to_owned(), "extra".to_owned())],
    );
    let l = m.labels.unwrap();
    assert_eq!(l[DESTINATION], FOREIGN);
    assert_eq!(l["k"], "extra");
}

#[test]
fn remote_meta_empty_annotations_are_none() {
    let ids = ids();
    let m = meta::remote(&meta_with(json!({}), json!({})), "x".into(), &ids.ctx(), []);
    assert_eq!(m.annotations, None);
}

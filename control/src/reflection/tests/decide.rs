//! [`decide`]: create, apply, delete, warn or nothing, from the local object and the remote
//! one of its name (ConfigMaps and Services stand for every kind).

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use serde_json::{Value, json};

use super::fixture::{
    DESTINATION, FOREIGN, HOME, ORIGIN, OTHER, REMOTE_NS, applied, assert_copy_meta, created, ids,
    json_of, no_inputs, obj, ours_labels, server_meta,
};
use crate::{
    reflection::{Action, REASON_REFUSED, decide},
    shadowpod::reflection::REASON_NOT_OURS,
};

fn local_cm(annotations: Value) -> ConfigMap {
    obj(json!({
        "metadata": {"name": "settings", "namespace": "demo", "uid": "u-local",
                     "resourceVersion": "17", "labels": {"app": "web", "tier": "front"},
                     "annotations": annotations},
        "data": {"a": "1", "b": "2"}
    }))
}

/// The remote ConfigMap `settings` as the provider stores it, with `labels` and `data`.
fn remote_cm(labels: Value, data: Value) -> ConfigMap {
    let mut meta = server_meta("settings", "u-remote");
    meta["labels"] = labels;
    obj(json!({"metadata": meta, "data": data}))
}

/// Our copy of [`local_cm`] without annotations (but the local UID), as the provider stores
/// it.
fn our_cm() -> ConfigMap {
    let mut cm = remote_cm(
        ours_labels(json!({"app": "web", "tier": "front"})),
        json!({"a": "1", "b": "2"}),
    );
    cm.metadata.annotations = Some(
        [(
            "reflection.liqo.io/local-uid".to_owned(),
            "u-local".to_owned(),
        )]
        .into(),
    );
    cm
}

fn foreign_cm() -> ConfigMap {
    remote_cm(json!({"app": "theirs"}), json!({"a": "x"}))
}

fn delete_of_remote() -> Action<ConfigMap> {
    Action::Delete {
        name: "settings".into(),
        uid: "u-remote".into(),
    }
}

#[test]
fn local_gone_remote_ours_is_deleted_by_name_and_uid() {
    let ids = ids();
    let a = decide::<ConfigMap>(None, Some(&our_cm()), &ids.ctx(), &no_inputs());
    assert_eq!(a, delete_of_remote());
}

#[test]
fn local_gone_remote_foreign_is_left_alone() {
    let ids = ids();
    let a = decide::<ConfigMap>(None, Some(&foreign_cm()), &ids.ctx(), &no_inputs());
    assert_eq!(a, Action::Nothing);
    // Reflection labels of another pair of clusters are not ours either.
    for labels in [
        json!({ORIGIN: HOME, DESTINATION: OTHER}),
        json!({ORIGIN: OTHER, DESTINATION: FOREIGN}),
        json!({ORIGIN: FOREIGN, DESTINATION: HOME}),
        json!({ORIGIN: HOME}),
    ] {
        let r = remote_cm(labels.clone(), json!({}));
        let a = decide::<ConfigMap>(None, Some(&r), &ids.ctx(), &no_inputs());
        assert_eq!(a, Action::Nothing, "{labels}");
    }
}

#[test]
fn local_gone_no_remote_is_nothing() {
    let ids = ids();
    assert_eq!(
        decide::<ConfigMap>(None, None, &ids.ctx(), &no_inputs()),
        Action::Nothing
    );
}

#[test]
fn local_without_remote_is_created_with_reflection_labels() {
    let ids = ids();
    let local = local_cm(json!({"note": "kept"}));
    let cm = created(decide(Some(&local), None, &ids.ctx(), &no_inputs()));
    assert_copy_meta(&cm.metadata, "settings");
    assert_eq!(
        json_of(&cm.metadata.labels),
        ours_labels(json!({"app": "web", "tier": "front"}))
    );
    assert_eq!(
        json_of(&cm.metadata.annotations),
        json!({"note": "kept", "reflection.liqo.io/local-uid": "u-local"})
    );
    assert_eq!(json_of(&cm.data), json!({"a": "1", "b": "2"}));
}

#[test]
fn local_service_without_remote_is_created_in_remote_namespace() {
    let ids = ids();
    let local: Service = obj(json!({
        "metadata": {"name": "web", "namespace": "demo", "uid": "u-svc", "labels": {"app": "web"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], "clusterIP": "10.96.0.12"}
    }));
    let s = created(decide(Some(&local), None, &ids.ctx(), &no_inputs()));
    assert_copy_meta(&s.metadata, "web");
    assert_eq!(s.metadata.namespace.as_deref(), Some(REMOTE_NS));
    assert_eq!(labels_len(&s.metadata), 3);
}

fn labels_len(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> usize {
    m.labels.as_ref().map_or(0, |l| l.len())
}

#[test]
fn remote_foreign_is_a_warning_naming_kind_namespace_and_name() {
    let ids = ids();
    let local = local_cm(json!({}));
    match decide(Some(&local), Some(&foreign_cm()), &ids.ctx(), &no_inputs()) {
        Action::Warn {
            reason,
            note,
            field,
        } => {
            assert_eq!(reason, "FailedReflection");
            assert_eq!(reason, REASON_NOT_OURS);
            assert!(note.contains("ConfigMap"), "{note}");
            assert!(note.contains("demo-rome/settings"), "{note}");
            assert_eq!(field, None);
        }
        other => panic!("expected Warn, got {other:?}"),
    }
}

#[test]
fn remote_foreign_service_warning_names_service() {
    let ids = ids();
    let local: Service = obj(json!({"metadata": {"name": "web", "namespace": "demo"},
                                    "spec": {"ports": [{"port": 80}]}}));
    let mut meta = server_meta("web", "u-theirs");
    meta["labels"] = json!({"app": "theirs"});
    let remote: Service = obj(json!({"metadata": meta, "spec": {"ports": [{"port": 80}]}}));
    match decide(Some(&local), Some(&remote), &ids.ctx(), &no_inputs()) {
        Action::Warn { reason, note, .. } => {
            assert_eq!(reason, REASON_NOT_OURS);
            assert!(note.contains("Service demo-rome/web"), "{note}");
        }
        other => panic!("expected Warn, got {other:?}"),
    }
}

#[test]
fn remote_ours_and_same_is_nothing() {
    let ids = ids();
    let a = decide(
        Some(&local_cm(json!({}))),
        Some(&our_cm()),
        &ids.ctx(),
        &no_inputs(),
    );
    assert_eq!(a, Action::Nothing);
}

#[test]
fn remote_ours_with_changed_data_is_applied() {
    let ids = ids();
    let remote = remote_cm(
        ours_labels(json!({"app": "web", "tier": "front"})),
        json!({"a": "1", "b": "old"}),
    );
    let local = local_cm(json!({}));
    let cm = applied(decide(
        Some(&local),
        Some(&remote),
        &ids.ctx(),
        &no_inputs(),
    ));
    assert_copy_meta(&cm.metadata, "settings");
    assert_eq!(json_of(&cm.data), json!({"a": "1", "b": "2"}));
}

#[test]
fn remote_ours_with_a_label_removed_locally_is_applied() {
    let ids = ids();
    let mut local = local_cm(json!({}));
    local.metadata.labels.as_mut().unwrap().remove("tier");
    let cm = applied(decide(
        Some(&local),
        Some(&our_cm()),
        &ids.ctx(),
        &no_inputs(),
    ));
    assert_eq!(
        json_of(&cm.metadata.labels),
        ours_labels(json!({"app": "web"}))
    );
}

#[test]
fn remote_ours_with_a_data_key_removed_locally_is_applied() {
    let ids = ids();
    let mut local = local_cm(json!({}));
    local.data.as_mut().unwrap().remove("b");
    let cm = applied(decide(
        Some(&local),
        Some(&our_cm()),
        &ids.ctx(),
        &no_inputs(),
    ));
    assert_eq!(json_of(&cm.data), json!({"a": "1"}));
}

#[test]
fn remote_ours_with_an_annotation_added_locally_is_applied() {
    let ids = ids();
    let local = local_cm(json!({"note": "new"}));
    let cm = applied(decide(
        Some(&local),
        Some(&our_cm()),
        &ids.ctx(),
        &no_inputs(),
    ));
    assert_eq!(
        json_of(&cm.metadata.annotations),
        json!({"note": "new", "reflection.liqo.io/local-uid": "u-local"})
    );
}

#[test]
fn skip_reflection_true_deletes_our_copy_only() {
    let ids = ids();
    let local = local_cm(json!({"liqo.io/skip-reflection": "true"}));
    let ctx = ids.ctx();
    assert_eq!(
        decide(Some(&local), Some(&our_cm()), &ctx, &no_inputs()),
        delete_of_remote()
    );
    assert_eq!(
        decide(Some(&local), Some(&foreign_cm()), &ctx, &no_inputs()),
        Action::Nothing
    );
    assert_eq!(
        decide(Some(&local), None, &ctx, &no_inputs()),
        Action::Nothing
    );
}

#[test]
fn skip_reflection_false_reflects() {
    let ids = ids();
    let local = local_cm(json!({"liqo.io/skip-reflection": "false"}));
    let cm = created(decide(Some(&local), None, &ids.ctx(), &no_inputs()));
    assert_copy_meta(&cm.metadata, "settings");
}

#[test]
fn skip_reflection_bad_value_warns_and_leaves_our_copy() {
    let ids = ids();
    let local = local_cm(json!({"liqo.io/skip-reflection": "yes"}));
    for remote in [Some(our_cm()), None] {
        match decide(Some(&local), remote.as_ref(), &ids.ctx(), &no_inputs()) {
            Action::Warn {
                reason,
                note,
                field,
            } => {
                assert_eq!(reason, REASON_REFUSED);
                let field = field.expect("the refused field");
                assert_eq!(field.field, "metadata.annotations[liqo.io/skip-reflection]");
                assert!(field.problem.contains("yes"), "{}", field.problem);
                assert!(note.contains("liqo.io/skip-reflection"), "{note}");
            }
            other => panic!("expected Warn, got {other:?}"),
        }
    }
}

#[test]
fn a_local_copy_reflected_here_is_not_reflected_back() {
    let ids = ids();
    let mut local = local_cm(json!({}));
    local.metadata.labels.as_mut().unwrap().extend([
        (ORIGIN.to_owned(), FOREIGN.to_owned()),
        (DESTINATION.to_owned(), HOME.to_owned()),
    ]);
    let ctx = ids.ctx();
    assert_eq!(
        decide(Some(&local), None, &ctx, &no_inputs()),
        Action::Nothing
    );
    assert_eq!(
        decide(Some(&local), Some(&our_cm()), &ctx, &no_inputs()),
        delete_of_remote()
    );
}

#[test]
fn a_copy_of_an_earlier_local_object_of_the_name_is_made_again() {
    let ids = ids();
    let mut remote = our_cm();
    remote
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("reflection.liqo.io/local-uid".into(), "u-earlier".into());
    remote.metadata.uid = Some("r-uid".into());
    let local = local_cm(json!({}));
    let got = decide(Some(&local), Some(&remote), &ids.ctx(), &no_inputs());
    assert!(
        matches!(&got, Action::Delete { uid, .. } if uid == "r-uid"),
        "{got:?}"
    );
    // Its own copy (same local UID) is kept.
    let mut own = our_cm();
    own.metadata
        .annotations
        .get_or_insert_default()
        .insert("reflection.liqo.io/local-uid".into(), "u-local".into());
    let same_uid = decide(Some(&local), Some(&own), &ids.ctx(), &no_inputs());
    assert!(!matches!(same_uid, Action::Delete { .. }), "{same_uid:?}");
}

#[test]
fn a_pods_token_secret_is_not_a_copy_and_is_left_alone() {
    let ids = ids();
    let token: k8s_openapi::api::core::v1::Secret = obj(json!({
        "metadata": {"name": "liqo-token-web", "namespace": REMOTE_NS, "uid": "t",
            "labels": ours_labels(json!({"liqo.io/token-for-pod": "web"}))},
        "type": "Opaque"
    }));
    let got =
        decide::<k8s_openapi::api::core::v1::Secret>(None, Some(&token), &ids.ctx(), &no_inputs());
    assert_eq!(got, Action::Nothing);
}

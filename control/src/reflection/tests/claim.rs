//! PersistentVolumeClaims: a claim of class `liqo` bound on this virtual node is copied with
//! the offer's class and without Kubernetes' binding annotations; others are never copied,
//! and a copy is never deleted but with its local claim.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::json;

use super::fixture::{NODE, created, ids, json_of, obj, ours_labels, server_meta};
use crate::reflection::{Action, Inputs, decide};

fn claim(class: &str, node: &str) -> PersistentVolumeClaim {
    obj(json!({
        "metadata": {"name": "data", "namespace": "demo", "uid": "u-1",
                     "labels": {"app": "db"},
                     "annotations": {"volume.kubernetes.io/selected-node": node,
                                     "volume.kubernetes.io/storage-provisioner": "liqo.io/storage",
                                     "pv.kubernetes.io/bind-completed": "yes",
                                     "team": "storage"}},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                 "volumeName": "pvc-u-1", "selector": {"matchLabels": {"disk": "ssd"}},
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
}

fn with_class(class: Option<&str>) -> Inputs {
    Inputs {
        storage_class: class.map(str::to_owned),
        ..Inputs::default()
    }
}

#[test]
fn a_liqo_claim_bound_here_is_copied_with_the_offers_class() {
    let ids = ids();
    let copy = created(decide(
        Some(&claim("liqo", NODE)),
        None,
        &ids.ctx(),
        &with_class(Some("fast")),
    ));
    let j = json_of(&copy);
    assert_eq!(j["metadata"]["name"], "data");
    assert_eq!(j["metadata"]["namespace"], "demo-rome");
    assert_eq!(j["metadata"]["labels"], ours_labels(json!({"app": "db"})));
    assert_eq!(
        j["metadata"]["annotations"],
        json!({"team": "storage", "reflection.liqo.io/local-uid": "u-1"}),
        "the binding annotations stay home"
    );
    assert_eq!(
        j["spec"],
        json!({"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
               "resources": {"requests": {"storage": "1Gi"}}}),
        "no volume name or selector: they name local objects"
    );
    // No class offered: the provider's default (the field is left out).
    let copy = created(decide(
        Some(&claim("liqo", NODE)),
        None,
        &ids.ctx(),
        &with_class(None),
    ));
    assert!(json_of(&copy)["spec"].get("storageClassName").is_none());
}

#[test]
fn other_claims_are_not_copied_and_a_copy_goes_only_with_its_claim() {
    let ids = ids();
    let ctx = ids.ctx();
    let inputs = with_class(Some("fast"));
    let copy = created(decide(Some(&claim("liqo", NODE)), None, &ctx, &inputs));
    let mut remote = copy.clone();
    remote.metadata = obj(server_meta("data", "r-1"));
    remote.metadata.labels = copy.metadata.labels.clone();
    remote.metadata.annotations = copy.metadata.annotations.clone();
    // The provider binds it: a volume name and its own class default are not differences.
    remote.spec.as_mut().unwrap().volume_name = Some("pvc-r-1".into());
    assert_eq!(
        decide(Some(&claim("liqo", NODE)), Some(&remote), &ctx, &inputs),
        Action::Nothing
    );
    // Bound on another node (or its annotation gone): the copy stays.
    assert_eq!(
        decide(Some(&claim("liqo", "n0")), Some(&remote), &ctx, &inputs),
        Action::Wait("not bound on this virtual node")
    );
    // Opted out after the copy was made: the copy (its data) stays.
    let mut opted_out = claim("liqo", NODE);
    opted_out
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("liqo.io/skip-reflection".into(), "true".into());
    assert_eq!(
        decide(Some(&opted_out), Some(&remote), &ctx, &inputs),
        Action::Nothing
    );
    // The claim deleted and made again under its name (the deletion missed), now opted out:
    // the old copy goes all the same.
    let mut again = opted_out.clone();
    again.metadata.uid = Some("u-2".into());
    assert!(matches!(
        decide(Some(&again), Some(&remote), &ctx, &inputs),
        Action::Delete { .. }
    ));
    // Another class: never copied.
    assert_eq!(
        decide(Some(&claim("standard", NODE)), None, &ctx, &inputs),
        Action::Nothing
    );
    // The local claim marked for deletion (its pods still hold it): the copy goes too.
    let mut deleting = claim("liqo", NODE);
    deleting.metadata.deletion_timestamp = Some(obj(json!("2026-11-30T03:00:00Z")));
    assert!(matches!(
        decide(Some(&deleting), Some(&remote), &ctx, &inputs),
        Action::Delete { .. }
    ));
    // The local claim deleted: the copy goes (its data with it, as asked).
    assert!(matches!(
        decide::<PersistentVolumeClaim>(None, Some(&remote), &ctx, &inputs),
        Action::Delete { ref name, ref uid } if name == "data" && uid == "r-1"
    ));
}

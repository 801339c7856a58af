use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::json;

use super::{
    forge,
    provision::{self, Action, NodeKind, Observed, Settings},
    reclaim,
};

pub(super) fn claim(class: &str, node: Option<&str>) -> PersistentVolumeClaim {
    let mut a = serde_json::Map::new();
    if let Some(n) = node {
        a.insert("volume.kubernetes.io/selected-node".into(), json!(n));
        a.insert(
            "volume.kubernetes.io/storage-provisioner".into(),
            json!("liqo.io/storage"),
        );
    }
    serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "app", "uid": "u-1", "annotations": a},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                 "volumeMode": "Filesystem", "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap()
}

pub(super) fn settings() -> Settings {
    Settings {
        namespace: "liqo-storage".into(),
        real_class: Some("local".into()),
        reclaim: "Delete".into(),
    }
}

pub(super) fn observe<'a>(
    c: &'a PersistentVolumeClaim,
    node: NodeKind,
    s: &'a Settings,
) -> Observed<'a> {
    Observed {
        claim: c,
        node,
        selected: None,
        volume: None,
        twin: None,
        twin_volume: None,
        static_volumes: None,
        settings: s,
    }
}

fn real_volume() -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": "local-n0"},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "local", "local": {"path": "/mnt/disk"},
                 "claimRef": {"namespace": "liqo-storage", "name": "u-1"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n0"]}]},
                     {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    }))
    .unwrap()
}

#[test]
fn a_claim_waits_for_its_first_consumer_and_other_classes_are_not_ours() {
    let s = settings();
    let c = claim("liqo", None);
    assert_eq!(
        provision::decide(&observe(&c, NodeKind::Physical, &s)).unwrap(),
        Action::Nothing("no node selected yet (first consumer)")
    );
    let other = claim("standard", Some("n0"));
    assert_eq!(
        provision::decide(&observe(&other, NodeKind::Physical, &s)).unwrap(),
        Action::Nothing("not of class liqo")
    );
    let mut asked_other = claim("liqo", Some("n0"));
    asked_other.metadata.annotations.as_mut().unwrap().insert(
        "volume.kubernetes.io/storage-provisioner".into(),
        "example.com/nfs".into(),
    );
    assert_eq!(
        provision::decide(&observe(&asked_other, NodeKind::Physical, &s)).unwrap(),
        Action::Nothing("another provisioner was asked")
    );
}

#[test]
fn on_a_physical_node_a_twin_claim_then_the_virtual_volume_with_data_gravity() {
    let s = settings();
    let c = claim("liqo", Some("n0"));
    let Action::CreateTwin(twin) = provision::decide(&observe(&c, NodeKind::Physical, &s)).unwrap()
    else {
        panic!("a twin claim first")
    };
    assert_eq!(twin.metadata.name.as_deref(), Some("u-1"));
    assert_eq!(twin.metadata.namespace.as_deref(), Some("liqo-storage"));
    assert!(forge::is_twin_of(&twin, "app", "data"));
    assert_eq!(
        twin.metadata.annotations.as_ref().unwrap()["volume.kubernetes.io/selected-node"],
        "n0"
    );
    let spec = twin.spec.as_ref().unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some("local"));
    assert_eq!(
        spec.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0,
        "1Gi"
    );
    // Not bound yet: wait.
    let mut o = observe(&c, NodeKind::Physical, &s);
    o.twin = Some(&twin);
    assert_eq!(
        provision::decide(&o).unwrap(),
        Action::Nothing("its twin claim is not bound yet")
    );
    // Bound: the virtual volume mirrors the real one.
    let mut bound = (*twin).clone();
    bound.status = Some(serde_json::from_value(json!({"phase": "Bound"})).unwrap());
    let real = real_volume();
    o.twin = Some(&bound);
    o.twin_volume = Some(&real);
    let Action::CreateVolume(v) = provision::decide(&o).unwrap() else {
        panic!("the virtual volume")
    };
    assert_eq!(v.metadata.name.as_deref(), Some("pvc-u-1"));
    assert!(forge::is_ours(&v));
    let spec = v.spec.as_ref().unwrap();
    assert_eq!(spec.local.as_ref().unwrap().path, "/mnt/disk");
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(spec.storage_class_name.as_deref(), Some("liqo"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let r = spec.claim_ref.as_ref().unwrap();
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
        (Some("app"), Some("data"), Some("u-1"))
    );
    let terms = &spec
        .node_affinity
        .as_ref()
        .unwrap()
        .required
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert_eq!(terms.len(), 2, "each real term keeps its own requirements");
    for t in terms {
        let e = t.match_expressions.as_ref().unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[1].key.as_str(), e[1].operator.as_str()),
            ("liqo.io/type", "DoesNotExist")
        );
    }
    // The volume exists: the PV controller binds it.
    o.volume = Some(&v);
    assert_eq!(
        provision::decide(&o).unwrap(),
        Action::Nothing("its volume exists (the PV controller binds it)")
    );
}

#[test]
fn on_a_virtual_node_a_placeholder_pinned_to_it_and_a_missing_node_is_refused() {
    let s = settings();
    let c = claim("liqo", Some("liqo-milan"));
    let Action::CreateVolume(v) = provision::decide(&observe(&c, NodeKind::Virtual, &s)).unwrap()
    else {
        panic!("a placeholder volume")
    };
    let spec = v.spec.as_ref().unwrap();
    assert_eq!(
        spec.host_path.as_ref().unwrap().path,
        "/tmp/liqo-placeholder"
    );
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "1Gi");
    let terms = &spec
        .node_affinity
        .as_ref()
        .unwrap()
        .required
        .as_ref()
        .unwrap()
        .node_selector_terms;
    let e = &terms[0].match_expressions.as_ref().unwrap()[0];
    assert_eq!(
        (e.key.as_str(), e.values.as_deref()),
        (
            "kubernetes.io/hostname",
            Some(&["liqo-milan".to_owned()][..])
        )
    );
    let Action::Unselect(why) = provision::decide(&observe(&c, NodeKind::Missing, &s)).unwrap()
    else {
        panic!("the selection undone")
    };
    assert!(why.contains("\"liqo-milan\" does not exist"), "{why}");
}

#[test]
fn a_twin_name_taken_by_another_claim_is_refused_and_a_claim_without_size_is_an_error() {
    let s = settings();
    let c = claim("liqo", Some("n0"));
    let mut stranger = c.clone();
    stranger.metadata.labels = None;
    stranger.metadata.annotations = None;
    let mut o = observe(&c, NodeKind::Physical, &s);
    o.twin = Some(&stranger);
    assert!(
        matches!(provision::decide(&o).unwrap(), Action::Refuse(w) if w.contains("liqo-storage/data"))
    );
    let mut no_size = claim("liqo", Some("n0"));
    no_size.spec.as_mut().unwrap().resources = None;
    let e = provision::decide(&observe(&no_size, NodeKind::Physical, &s)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "PersistentVolumeClaim app/data has no spec.resources.requests.storage"
    );
}

fn released(policy: &str, phase: &str) -> PersistentVolume {
    let c = claim("liqo", Some("n0"));
    let mut v = forge::placeholder_volume(&c, "liqo-milan", policy).unwrap();
    v.metadata.uid = Some("v-1".into());
    v.status = Some(serde_json::from_value(json!({"phase": phase})).unwrap());
    v
}

#[test]
fn a_released_volume_goes_after_its_twin_and_never_with_retain_or_a_claim() {
    let v = released("Delete", "Released");
    let c = claim("liqo", Some("n0"));
    let mut twin = forge::twin_claim(&c, "n0", None, "liqo-storage").unwrap();
    twin.metadata.uid = Some("t-1".into());
    assert_eq!(
        reclaim::decide(&v, Some(&twin)),
        reclaim::Action::DeleteTwin {
            namespace: "liqo-storage".into(),
            name: "u-1".into(),
            uid: "t-1".into()
        }
    );
    assert_eq!(
        reclaim::decide(&v, None),
        reclaim::Action::DeleteVolume {
            name: "pvc-u-1".into(),
            uid: "v-1".into()
        }
    );
    // A claim of that name that is not the twin is not deleted.
    let mut stranger = twin.clone();
    stranger.metadata.annotations = None;
    assert!(matches!(
        reclaim::decide(&v, Some(&stranger)),
        reclaim::Action::DeleteVolume { .. }
    ));
    assert_eq!(
        reclaim::decide(&released("Retain", "Released"), Some(&twin)),
        reclaim::Action::Nothing("reclaim policy is not Delete")
    );
    assert_eq!(
        reclaim::decide(&released("Delete", "Bound"), Some(&twin)),
        reclaim::Action::Nothing("its claim exists")
    );
    let mut foreign = released("Delete", "Released");
    foreign.metadata.annotations = None;
    assert!(matches!(
        reclaim::decide(&foreign, None),
        reclaim::Action::Nothing(_)
    ));
}

#[test]
fn a_twin_whose_claim_is_gone_before_its_volume_goes_too() {
    let c = claim("liqo", Some("n0"));
    let mut twin = forge::twin_claim(&c, "n0", None, "liqo-storage").unwrap();
    twin.metadata.uid = Some("t-1".into());
    // Its claim live: kept; a volume made: the release path's.
    assert_eq!(reclaim::orphan(&twin, Some(&c), false), None);
    assert_eq!(reclaim::orphan(&twin, None, true), None);
    let gone = Some(reclaim::Action::DeleteTwin {
        namespace: "liqo-storage".into(),
        name: "u-1".into(),
        uid: "t-1".into(),
    });
    assert_eq!(reclaim::orphan(&twin, None, false), gone);
    // Another claim of that name (re-created): the twin is not its.
    let mut other = c.clone();
    other.metadata.uid = Some("u-2".into());
    assert_eq!(reclaim::orphan(&twin, Some(&other), false), gone);
    // Not a twin of ours (no names): never.
    let mut stranger = twin.clone();
    stranger.metadata.annotations = None;
    assert_eq!(reclaim::orphan(&stranger, None, false), None);
}

#[test]
fn a_volume_names_its_twin_by_its_own_name_even_once_moved_to_another_claim() {
    let c = claim("liqo", Some("n0"));
    let mut twin = forge::twin_claim(&c, "n0", None, "liqo-storage").unwrap();
    twin.metadata.uid = Some("t-1".into());
    // `liqoctl move volume`: re-bound to a new claim of the same name (another UID); the twin
    // keeps its name.
    let mut v = released("Delete", "Released");
    v.spec.as_mut().unwrap().claim_ref.as_mut().unwrap().uid = Some("u-2".into());
    assert_eq!(forge::twin_name_of(&v), Some("u-1"));
    assert_eq!(forge::twin_name_of(&v), twin.metadata.name.as_deref());
    assert!(matches!(
        reclaim::decide(&v, Some(&twin)),
        reclaim::Action::DeleteTwin { .. }
    ));
    for name in ["local-n0", "pvc-"] {
        v.metadata.name = Some(name.into());
        assert_eq!(forge::twin_name_of(&v), None, "{name}");
    }
}

use k8s_openapi::api::{
    core::v1::{Node, PersistentVolume, PersistentVolumeClaim},
    storage::v1::StorageClass,
};
use serde_json::{Value, json};

use super::{default_class, is_static, pick, pre_bind_patch};
use crate::storage::{
    forge,
    provision::{self, Action, NodeKind},
    tests::{claim, observe, settings},
};

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "zone": "a"}}}))
    .unwrap()
}

/// The twin of `claim("liqo", n0)`, of class `local`, as read back (with its UID).
fn twin() -> PersistentVolumeClaim {
    let c = claim("liqo", Some("n0"));
    let mut t = forge::twin_claim(&c, "n0", Some("local"), "liqo-storage").unwrap();
    t.metadata.uid = Some("t-1".into());
    t
}

/// A volume of class `local`, 1Gi, ReadWriteOnce, Available, pinned to n0 by hostname; `f`
/// changes it.
fn pv(name: &str, f: impl FnOnce(&mut Value)) -> PersistentVolume {
    let mut v = json!({
        "metadata": {"name": name, "resourceVersion": "7"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "local", "local": {"path": format!("/mnt/{name}")},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n0"]}]}]}}},
        "status": {"phase": "Available"}
    });
    f(&mut v);
    serde_json::from_value(v).unwrap()
}

fn name(v: Option<&PersistentVolume>) -> Option<&str> {
    v.and_then(|v| v.metadata.name.as_deref())
}

#[test]
fn the_smallest_fitting_volume_is_picked_equal_sizes_by_name() {
    let (t, n0) = (twin(), node("n0"));
    let vols = vec![
        pv("a-big", |v| v["spec"]["capacity"]["storage"] = json!("5Gi")),
        pv("c-same", |v| {
            v["spec"]["capacity"]["storage"] = json!("1024Mi")
        }),
        pv("b-fits", |_| {}),
        pv("a-decimal", |v| {
            v["spec"]["capacity"]["storage"] = json!("1100M")
        }),
    ];
    assert_eq!(name(pick(&t, &vols, &n0)), Some("b-fits"));
    assert_eq!(
        name(pick(&t, &vols[..2], &n0)),
        Some("c-same"),
        "1024Mi = 1Gi"
    );
    assert_eq!(
        name(pick(&t, &[vols[0].clone(), vols[3].clone()], &n0)),
        Some("a-decimal"),
        "1100M is less than 5Gi"
    );
    // Other affinities that match n0: by another label, by name, none at all; no status yet.
    for fits in [
        pv("zone", |v| {
            v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0] =
                json!({"key": "zone", "operator": "In", "values": ["a"]})
        }),
        pv("field", |v| {
            v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = json!([{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n0"]}]}])
        }),
        pv("anywhere", |v| v["spec"]["nodeAffinity"] = Value::Null),
        pv("new", |v| v["status"] = Value::Null),
        pv("superset", |v| {
            v["spec"]["accessModes"] = json!(["ReadOnlyMany", "ReadWriteOnce"])
        }),
    ] {
        let got = name(pick(&t, std::slice::from_ref(&fits), &n0));
        assert_eq!(got, fits.metadata.name.as_deref());
    }
}

#[test]
fn volumes_that_do_not_fit_are_skipped() {
    let (t, n0) = (twin(), node("n0"));
    let skipped = [
        pv("wrong-class", |v| {
            v["spec"]["storageClassName"] = json!("fast")
        }),
        pv("no-class", |v| v["spec"]["storageClassName"] = Value::Null),
        pv("too-small", |v| {
            v["spec"]["capacity"]["storage"] = json!("1000M")
        }),
        pv("no-capacity", |v| v["spec"]["capacity"] = Value::Null),
        pv("claimed", |v| {
            v["spec"]["claimRef"] = json!({"namespace": "other", "name": "data"})
        }),
        pv("released", |v| v["status"]["phase"] = json!("Released")),
        pv("other-node", |v| {
            v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] =
                json!(["n1"])
        }),
        pv("bad-affinity", |v| {
            v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] =
                json!("Near")
        }),
        pv("read-only", |v| {
            v["spec"]["accessModes"] = json!(["ReadOnlyMany"])
        }),
        pv("block", |v| v["spec"]["volumeMode"] = json!("Block")),
        pv("deleting", |v| {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z")
        }),
    ];
    for v in &skipped {
        assert_eq!(
            name(pick(&t, std::slice::from_ref(v), &n0)),
            None,
            "{:?}",
            v.metadata.name
        );
    }
    let mut all = skipped.to_vec();
    all.push(pv("z-fits", |_| {}));
    assert_eq!(name(pick(&t, &all, &n0)), Some("z-fits"));
}

#[test]
fn a_twin_of_a_static_class_is_pre_bound_to_the_volume_picked() {
    let s = settings();
    let c = claim("liqo", Some("n0"));
    let (t, n0) = (twin(), node("n0"));
    let vols = vec![
        pv("big", |v| v["spec"]["capacity"]["storage"] = json!("2Gi")),
        pv("small", |_| {}),
    ];
    let mut o = observe(&c, NodeKind::Physical, &s);
    o.twin = Some(&t);
    o.selected = Some(&n0);
    o.static_volumes = Some(&vols);
    let Action::PreBind {
        volume,
        resource_version,
        claim_ref,
    } = provision::decide(&o).unwrap()
    else {
        panic!("a pre-binding")
    };
    assert_eq!((volume.as_str(), resource_version.as_str()), ("small", "7"));
    assert_eq!(
        pre_bind_patch(&resource_version, &claim_ref),
        json!({"metadata": {"resourceVersion": "7",
                            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
               "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                     "namespace": "liqo-storage", "name": "u-1", "uid": "t-1"}}})
    );
    // Pre-bound already (the PV controller has not bound them yet): nothing more.
    let mut taken = vols.clone();
    taken[1].spec.as_mut().unwrap().claim_ref = Some(claim_ref);
    o.static_volumes = Some(&taken);
    assert!(matches!(
        provision::decide(&o).unwrap(),
        Action::Nothing(w) if w.contains("pre-bound")
    ));
    // The twin names a volume already (the PV controller is binding it): nothing.
    let mut binding = t.clone();
    binding.spec.as_mut().unwrap().volume_name = Some("big".into());
    o.twin = Some(&binding);
    o.static_volumes = Some(&vols);
    assert_eq!(
        provision::decide(&o).unwrap(),
        Action::Nothing("its twin claim is not bound yet")
    );
    // A twin being deleted: nothing.
    let mut going = t.clone();
    going.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    o.twin = Some(&going);
    assert_eq!(
        provision::decide(&o).unwrap(),
        Action::Nothing("its twin claim is being deleted")
    );
}

#[test]
fn no_fitting_static_volume_is_refused_and_a_provisioned_class_is_not_touched() {
    let s = settings();
    let c = claim("liqo", Some("n0"));
    let (t, n0) = (twin(), node("n0"));
    let other = vec![pv("elsewhere", |v| {
        v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] =
            json!(["n1"])
    })];
    let mut o = observe(&c, NodeKind::Physical, &s);
    o.twin = Some(&t);
    o.selected = Some(&n0);
    o.static_volumes = Some(&other);
    assert_eq!(
        provision::decide(&o).unwrap(),
        Action::Refuse(
            "not provisioned: no static volume of class local fits on node n0 (needs 1Gi, \
             ReadWriteOnce)"
                .into()
        )
    );
    o.static_volumes = Some(&[]);
    assert!(matches!(provision::decide(&o).unwrap(), Action::Refuse(_)));
    // Not a static class: its provisioner binds the twin, whatever volumes there are.
    let fits = vec![pv("fits", |_| {})];
    o.static_volumes = None;
    assert_eq!(
        provision::decide(&o).unwrap(),
        Action::Nothing("its twin claim is not bound yet")
    );
    // A twin whose size is not a quantity: an error naming it.
    let mut bad = t.clone();
    bad.spec.as_mut().unwrap().resources =
        Some(serde_json::from_value(json!({"requests": {"storage": "lots"}})).unwrap());
    o.twin = Some(&bad);
    o.static_volumes = Some(&fits);
    assert_eq!(
        provision::decide(&o).unwrap_err().to_string(),
        "PersistentVolumeClaim liqo-storage/u-1 has a bad spec.resources.requests.storage"
    );
}

fn class(name: &str, provisioner: &str, default: Option<&str>, created: &str) -> StorageClass {
    let mut c = json!({"metadata": {"name": name, "creationTimestamp": created},
                       "provisioner": provisioner});
    if let Some(key) = default {
        c["metadata"]["annotations"] = json!({key: "true"});
    }
    serde_json::from_value(c).unwrap()
}

#[test]
fn the_default_class_is_the_newest_marked_and_static_means_no_provisioner() {
    const GA: &str = "storageclass.kubernetes.io/is-default-class";
    const BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";
    let old = "2026-01-01T00:00:00Z";
    let new = "2026-02-01T00:00:00Z";
    let classes = vec![
        class("fast", "example.com/csi", None, new),
        class("b-local", "kubernetes.io/no-provisioner", Some(GA), old),
        class("a-local", "kubernetes.io/no-provisioner", Some(BETA), old),
    ];
    let d = default_class(&classes).unwrap();
    assert_eq!(d.metadata.name.as_deref(), Some("a-local"), "ties by name");
    assert!(is_static(d));
    assert!(!is_static(&classes[0]));
    let mut newer = classes.clone();
    newer.push(class("csi", "example.com/csi", Some(GA), new));
    assert_eq!(
        default_class(&newer).unwrap().metadata.name.as_deref(),
        Some("csi")
    );
    assert!(default_class(&classes[..1]).is_none());
}

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use serde_json::json;

use super::*;

fn claim(class: &str, phase: &str, node: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "shop", "uid": "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901",
            "labels": {"app": "db"},
            "annotations": {"volume.kubernetes.io/selected-node": node, "pv.kubernetes.io/bind-completed": "yes", "team": "a"}},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "volumeName": "pvc-old",
            "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": phase, "capacity": {"storage": "2Gi"}},
    }))
    .unwrap()
}

fn pod(name: &str, claim: &str, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"nodeName": "liqo-milan", "containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]},
        "status": {"phase": phase},
    }))
    .unwrap()
}

#[test]
fn a_bound_unmounted_liqo_claim_moves_to_a_physical_node_only() {
    let c = claim("liqo", "Bound", "liqo-milan");
    let done = [
        pod("old", "data", "Succeeded"),
        pod("other", "logs", "Running"),
    ];
    assert_eq!(check(&c, &done, "n1", NodeKind::Physical), Ok(()));
    let e = check(&c, &done, "n9", NodeKind::Missing).unwrap_err();
    assert_eq!(e.to_string(), "node \"n9\" does not exist");
    let e = check(&c, &done, "liqo-paris", NodeKind::Virtual).unwrap_err();
    assert!(
        e.to_string().starts_with("liqo-paris is a virtual node"),
        "{e}"
    );
    let there = claim("liqo", "Bound", "n1");
    let e = check(&there, &[], "n1", NodeKind::Physical).unwrap_err();
    assert_eq!(e.to_string(), "shop/data is on node n1 already");
}

#[test]
fn a_pod_that_used_the_claim_during_the_copy_is_seen_even_finished() {
    let mut old = pod("old", "data", "Succeeded");
    old.metadata.uid = Some("u-old".into());
    let mut quick = pod("quick", "data", "Succeeded");
    quick.metadata.uid = Some("u-quick".into());
    let mut other = pod("other", "logs", "Running");
    other.metadata.uid = Some("u-other".into());
    let mut mover = pod("liqo-move-x-send", "data", "Running");
    mover.metadata.uid = Some("u-mover".into());
    mover.metadata.labels = Some([(MOVE_OF.to_owned(), "moved".to_owned())].into());
    let seen: std::collections::BTreeSet<String> = ["u-old".to_owned()].into();
    let pods = [old, quick, other, mover];
    let used: Vec<&str> = used_since("data", "moved", &pods, &seen)
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(used, ["quick"]);
}

#[test]
fn refusals_name_the_claim_its_class_phase_and_each_pod() {
    let e = check(
        &claim("local", "Bound", "n0"),
        &[],
        "n1",
        NodeKind::Physical,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("shop/data is of class \"local\", not liqo"),
        "{e}"
    );
    let e = check(
        &claim("liqo", "Pending", "n0"),
        &[],
        "n1",
        NodeKind::Physical,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "shop/data is not bound (phase Pending): there is no data to move"
    );
    let pods = [
        pod("db-0", "data", "Running"),
        pod("db-1", "data", "Pending"),
    ];
    let e = check(
        &claim("liqo", "Bound", "liqo-milan"),
        &pods,
        "n1",
        NodeKind::Physical,
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with(
            "shop/data is mounted by pod shop/db-0 (on liqo-milan), pod shop/db-1 (on liqo-milan):"
        ),
        "{e}"
    );
}

#[test]
fn the_objects_of_a_move_carry_its_label_and_mount_the_right_claims() {
    let c = claim("liqo", "Bound", "liqo-milan");
    let names = Names::new(c.metadata.uid.as_deref().unwrap());
    assert_eq!(names.base, "liqo-move-1b2c3d4e");
    let image = Image {
        name: "reg/liqo-controller-manager:v1".into(),
        pull_policy: Some("Never".into()),
    };
    let t = temp_claim(&c, "n1", &names).unwrap();
    assert_eq!(t.metadata.name.as_deref(), Some("liqo-move-1b2c3d4e"));
    let spec = t.spec.unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some("liqo"));
    assert_eq!(spec.volume_name, None);
    assert_eq!(
        spec.resources.unwrap().requests.unwrap()["storage"].0,
        "2Gi"
    );
    assert_eq!(t.metadata.labels.unwrap()[MOVE_OF], names.uid);

    let r = serde_json::to_value(receiver_job(&c, &names, &image, "n1", 600).unwrap()).unwrap();
    let pod = &r["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "liqo-move-1b2c3d4e"
    );
    assert_eq!(pod["containers"][0]["command"][1], "receive");
    // It listens on its own address only (not every interface), from the downward API.
    let command: Vec<&str> = pod["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = command.iter().position(|a| *a == "--listen").unwrap();
    assert_eq!(
        command[at + 1],
        format!("$({}):{PORT}", super::objects::POD_IP_ENV)
    );
    assert!(!command.iter().any(|a| a.starts_with("0.0.0.0")));
    assert_eq!(
        pod["containers"][0]["env"][1]["valueFrom"]["fieldRef"]["fieldPath"],
        "status.podIP"
    );
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "Never");
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"][0]["values"][0],
        "n1"
    );
    assert_eq!(r["spec"]["template"]["metadata"]["labels"][ROLE], "receive");
    let s = serde_json::to_value(sender_job(&c, &names, &image, 600).unwrap()).unwrap();
    let pod = &s["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "data"
    );
    assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["readOnly"], true);
    assert_eq!(
        pod["containers"][0]["command"][5],
        "liqo-move-1b2c3d4e:8080"
    );
    assert_eq!(
        pod["tolerations"][0]["key"],
        "virtual-node.liqo.io/not-allowed"
    );
    let svc = serde_json::to_value(service(&c, &names).unwrap()).unwrap();
    assert_eq!(svc["spec"]["selector"][ROLE], "receive");
    let sec = token_secret(&c, &names, "t0k3n").unwrap();
    assert_eq!(sec.string_data.unwrap()[TOKEN_ENV], "t0k3n");
}

#[test]
fn the_rebound_claim_keeps_its_name_and_labels_and_names_the_new_volume() {
    let c = claim("liqo", "Bound", "liqo-milan");
    let r = rebound_claim(&c, "pvc-new", "n1").unwrap();
    assert_eq!(r.metadata.name.as_deref(), Some("data"));
    assert_eq!(r.metadata.uid, None);
    assert_eq!(r.metadata.labels.unwrap()["app"], "db");
    let a = r.metadata.annotations.unwrap();
    assert_eq!(a["volume.kubernetes.io/selected-node"], "n1");
    assert_eq!(a["team"], "a");
    assert!(!a.contains_key("pv.kubernetes.io/bind-completed"));
    let spec = r.spec.unwrap();
    assert_eq!(spec.volume_name.as_deref(), Some("pvc-new"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("liqo"));
    assert!(r.status.is_none());
    let mut v: PersistentVolume = serde_json::from_value(json!({"spec": {"claimRef": {
        "namespace": "shop", "name": "liqo-move-1b2c3d4e", "uid": "t", "resourceVersion": "7"}}}))
    .unwrap();
    assert!(!reserved_for(&v, "shop", "data"));
    let mut value = serde_json::to_value(&v).unwrap();
    json_patch_merge(&mut value, &reserve_patch("shop", "data"));
    v = serde_json::from_value(value).unwrap();
    assert!(reserved_for(&v, "shop", "data"), "{v:?}");
    assert!(!reserved_for(&v, "shop", "logs"));
}

/// RFC 7386, as the API server applies a merge patch.
fn json_patch_merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    json_patch_merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn kept(from: &str) -> PersistentVolume {
    serde_json::from_value(json!({"metadata": {"name": "pvc-new",
        "annotations": {MOVED_FROM_UID: from, MOVED_CLAIM: "{}"}}}))
    .unwrap()
}

#[test]
fn a_kept_copy_is_finished_discarded_or_left_alone_by_the_claim_found() {
    let original = claim("liqo", "Bound", "liqo-milan");
    let uid = original.metadata.uid.clone().unwrap();
    let v = kept(&uid);
    assert_eq!(resume(None, None), Resume::NotFound);
    assert_eq!(resume(Some(&original), None), Resume::Start);
    // The original gone: finish; still there: its data counts, the copy goes.
    assert_eq!(resume(None, Some(&v)), Resume::Finish);
    assert_eq!(resume(Some(&original), Some(&v)), Resume::Discard);
    let mut going = original.clone();
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-03-04T05:06:07Z".parse().unwrap(),
    ));
    assert_eq!(resume(Some(&going), Some(&v)), Resume::WaitThenFinish);
    // Bound to the copy already: finish.
    let mut rebound = original.clone();
    rebound.metadata.uid = Some("other".into());
    rebound.spec.as_mut().unwrap().volume_name = Some("pvc-new".into());
    assert_eq!(resume(Some(&rebound), Some(&v)), Resume::Finish);
    // Another claim of that name (made again by someone): the copy is never discarded for it.
    let mut other = original.clone();
    other.metadata.uid = Some("other".into());
    let Resume::Conflict(why) = resume(Some(&other), Some(&v)) else {
        panic!("not a conflict");
    };
    assert!(
        why.starts_with(
            "claim shop/data (UID other) is not the claim whose data volume pvc-new holds"
        ),
        "{why}"
    );
    assert!(matches!(
        resume(Some(&original), Some(&kept(""))),
        Resume::Conflict(_)
    ));
}

#[test]
fn the_last_manifest_line_is_read_and_a_broken_one_is_not() {
    let d = "a".repeat(64);
    let log = format!(
        "starting\nmanifest sha256={} files=1 bytes=2\nmanifest sha256={d} files=3 dirs=1 symlinks=0 bytes=104857600\nverified\n",
        "b".repeat(64)
    );
    assert_eq!(
        manifest(&log),
        Some(Manifest {
            digest: d.clone(),
            files: 3,
            bytes: 104857600
        })
    );
    assert_eq!(manifest("manifest sha256=xyz files=1 bytes=1"), None);
    assert_eq!(
        manifest(&format!("manifest sha256={d} files=x bytes=1")),
        None
    );
    assert_eq!(manifest("nothing"), None);
}

#[test]
fn each_try_names_its_jobs_apart_and_every_try_shares_the_labels() {
    let uid = "1b2c3d4e-0000-4000-8000-000000000001";
    let first = Names::attempt(uid, &Names::attempt_mark(1));
    let second = Names::attempt(uid, &Names::attempt_mark(36u128.pow(5) + 2));
    assert_eq!(first.job("send"), "liqo-move-1b2c3d4e-send-00001");
    assert_eq!(second.job("send"), "liqo-move-1b2c3d4e-send-00002");
    assert_ne!(first.job("receive"), second.job("receive"));
    // What finds an earlier try's objects is the same for every try.
    assert_eq!(first.selector(), Names::new(uid).selector());
    assert_eq!(first.base, Names::new(uid).base);
    assert_eq!(Names::new(uid).job("send"), "liqo-move-1b2c3d4e-send");
    assert_eq!(Names::attempt_mark(35), "0000z");
    assert_eq!(Names::attempt_mark(u128::MAX).len(), 5);
    // A Job's pods carry its name in a label: at most 63 characters.
    assert!(first.job("receive").len() <= 63);
}

//! The replicator's decisions.
use serde_json::json;

use super::*;

/// rome's decisions, deletions going ahead.
fn proceed(allowed: bool, sources: &[Source], replicas: &[Replica]) -> Vec<Action> {
    decide(allowed, Deletions::Proceed, "rome-id", sources, replicas)
}

fn source(name: &str, deleting: bool, has_finalizer: bool) -> Source {
    Source {
        name: name.into(),
        deleting,
        has_finalizer,
        labels: [
            (labels::REPLICATION.to_string(), values::TRUE.to_string()),
            (labels::REMOTE_ID.to_string(), "milan-id".to_string()),
            (labels::OWNERSHIP.to_string(), "x".to_string()),
        ]
        .into(),
        annotations: [("a".to_string(), "b".to_string())].into(),
        spec: json!({"authUrl": "https://rome.example:443"}),
        status: None,
    }
}

fn replica_of(s: &Source, status: Option<Value>) -> Replica {
    let d = desired(s, "rome-id");
    Replica {
        name: d.name,
        labels: d.labels,
        annotations: d.annotations,
        spec: d.spec,
        status,
    }
}

#[test]
fn the_copy_drops_ownership_and_marks_its_origin() {
    let d = desired(&source("rome", false, true), "rome-id");
    assert_eq!(d.labels.get(labels::OWNERSHIP), None);
    assert_eq!(d.labels[labels::REPLICATION], "false");
    assert_eq!(d.labels[labels::REPLICATED], "true");
    assert_eq!(d.labels[labels::ORIGIN_ID], "rome-id");
    assert_eq!(d.labels[labels::REMOTE_ID], "milan-id");
    assert_eq!(d.annotations["a"], "b");
}

#[test]
fn a_new_source_gets_the_finalizer_and_a_copy() {
    let s = source("rome", false, false);
    let a = proceed(true, std::slice::from_ref(&s), &[]);
    assert_eq!(
        a,
        vec![
            Action::AddFinalizer("rome".into()),
            Action::ApplyReplica(desired(&s, "rome-id"))
        ]
    );
}

#[test]
fn an_up_to_date_copy_sends_its_status_back_once() {
    let mut s = source("rome", false, true);
    let status = json!({"offerState": "Created"});
    let r = replica_of(&s, Some(status.clone()));
    let a = proceed(true, std::slice::from_ref(&s), std::slice::from_ref(&r));
    assert_eq!(a, vec![Action::StatusBack("rome".into(), status.clone())]);
    s.status = Some(status);
    assert!(proceed(true, &[s], &[r]).is_empty());
}

#[test]
fn a_changed_spec_is_applied_again() {
    let s = source("rome", false, true);
    let mut r = replica_of(&s, None);
    r.spec = json!({"authUrl": "https://old.example"});
    let a = proceed(true, std::slice::from_ref(&s), &[r]);
    assert_eq!(a, vec![Action::ApplyReplica(desired(&s, "rome-id"))]);
}

#[test]
fn annotations_the_peer_adds_to_a_copy_are_left_alone() {
    let s = source("rome", false, true);
    let mut r = replica_of(&s, None);
    r.annotations
        .insert("net.liqo.io/refused".into(), "spec.podCIDR: bad".into());
    assert!(proceed(true, std::slice::from_ref(&s), &[r.clone()]).is_empty());
    // One of ours missing or changed is applied again.
    r.annotations.insert("a".into(), "changed".into());
    assert_eq!(
        proceed(true, std::slice::from_ref(&s), &[r]),
        vec![Action::ApplyReplica(desired(&s, "rome-id"))]
    );
}

#[test]
fn deletion_removes_the_copy_then_the_finalizer() {
    let s = source("rome", true, true);
    let r = replica_of(&s, None);
    assert_eq!(
        proceed(true, std::slice::from_ref(&s), &[r]),
        vec![Action::DeleteReplica("rome".into())]
    );
    assert_eq!(
        proceed(true, std::slice::from_ref(&s), &[]),
        vec![Action::RemoveFinalizer("rome".into())]
    );
    let gone = source("rome", true, false);
    assert!(proceed(true, &[gone], &[]).is_empty());
}

#[test]
fn a_kind_no_longer_allowed_is_withdrawn() {
    let s = source("rome", false, true);
    let r = replica_of(&s, None);
    assert_eq!(
        proceed(false, std::slice::from_ref(&s), &[r]),
        vec![Action::DeleteReplica("rome".into())]
    );
    assert_eq!(
        proceed(false, &[s], &[]),
        vec![Action::RemoveFinalizer("rome".into())]
    );
    // Never replicated: nothing.
    assert!(proceed(false, &[source("x", false, false)], &[]).is_empty());
}

#[test]
fn the_foreign_cluster_waits_for_its_sources() {
    assert_eq!(fc_finalizer(false, false, true, 0), Some(true));
    assert_eq!(fc_finalizer(false, false, false, 0), None);
    assert_eq!(fc_finalizer(false, true, true, 3), None);
    assert_eq!(fc_finalizer(true, true, true, 1), None);
    assert_eq!(fc_finalizer(true, true, false, 0), Some(false));
    assert_eq!(fc_finalizer(true, false, true, 0), None);
}

#[test]
fn an_orphan_copy_is_deleted() {
    let s = source("gone", false, true);
    let r = replica_of(&s, None);
    assert_eq!(
        proceed(true, &[], &[r]),
        vec![Action::DeleteReplica("gone".into())]
    );
}

#[test]
fn a_peer_silent_long_enough_has_the_deleted_sources_let_go() {
    let grace = Duration::from_secs(300);
    assert_eq!(let_go_after(false, grace), grace);
    assert_eq!(let_go_after(true, grace), IN_BAND_WAIT);
    assert_eq!(
        let_go_after(true, Duration::from_secs(5)),
        Duration::from_secs(5)
    );
    let all = [
        source("ours", true, true),
        source("kept", false, true),
        source("released", true, false),
    ];
    let secs = Duration::from_secs;
    assert!(let_go(&all, secs(29), IN_BAND_WAIT).is_empty());
    assert_eq!(
        let_go(&all, secs(30), IN_BAND_WAIT),
        vec![Action::RemoveFinalizer("ours".into())]
    );
}

#[test]
fn an_in_band_network_config_goes_last() {
    use ReplicatedKind::*;
    assert_eq!(holds(NetworkConfig, true, true, 2), Deletions::Hold);
    for (kind, in_band, deleting, others) in [
        (NetworkConfig, true, true, 0),
        (NetworkConfig, false, true, 2),
        (NetworkConfig, true, false, 2),
        (ResourceRequest, true, true, 2),
    ] {
        assert_eq!(
            holds(kind, in_band, deleting, others),
            Deletions::Proceed,
            "{kind:?}"
        );
    }
    // Held: the deleted source and its copy stay as they are.
    let s = source("rome", true, true);
    let r = replica_of(&s, None);
    let held = |r: &[Replica]| {
        decide(
            true,
            Deletions::Hold,
            "rome-id",
            std::slice::from_ref(&s),
            r,
        )
    };
    assert!(held(std::slice::from_ref(&r)).is_empty());
    assert!(held(&[]).is_empty());
}

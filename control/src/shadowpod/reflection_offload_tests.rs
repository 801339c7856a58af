//! [`decide`](super::reflection::decide) and its helpers on what the review of issue 16 found:
//! the remote pod of an earlier ShadowPod, an IPAM outage, a foreign remote Pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::reflection::{
    Action, LABEL_AFTER, PROBE_AFTER, current_remote, decide, label_in, needs_ips, probe_foreign,
    without_status,
};
use super::reflection_tests::{ctx, ids, local, mapped, now, remote, shadow_of, terminating};

/// [`now`] `secs` seconds ago.
fn created(secs: i64) -> Time {
    Time(
        now()
            .0
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
            .unwrap(),
    )
}

#[test]
fn a_same_name_remote_pod_of_an_earlier_shadow_pod_lends_no_status() {
    let ids = ids();
    let l = local();
    // The ShadowPod re-created (new UID) while the old remote pod still terminates.
    let mut s = shadow_of(&l, &ids);
    s.metadata.uid = Some("u-shadow-2".into());
    let mut old = remote(&ids);
    old.metadata.deletion_timestamp = Some(now());
    let ips = ["10.201.0.9".to_owned()];
    assert!(current_remote(Some(&s.metadata), Some(&old)).is_none());
    assert_eq!(
        decide(Some(&l), mapped(Some(&s), Some(&old)), &ctx(&ids, &ips)),
        []
    );
    // A terminating local pod whose ShadowPod goes: still not the old pod's status.
    let mut going = s.clone();
    going.metadata.deletion_timestamp = Some(now());
    let t = terminating(local());
    assert_eq!(
        decide(Some(&t), mapped(Some(&going), Some(&old)), &ctx(&ids, &ips)),
        []
    );
    // Its own pod (controller reference to the current ShadowPod) does.
    let mut own = remote(&ids);
    own.metadata.owner_references.as_mut().unwrap()[0].uid = "u-shadow-2".into();
    assert!(current_remote(Some(&s.metadata), Some(&own)).is_some());
    let got = decide(Some(&l), mapped(Some(&s), Some(&own)), &ctx(&ids, &ips));
    assert!(matches!(&got[..], [Action::WriteStatus { .. }]), "{got:?}");
    // A controller reference that is not a ShadowPod's, or not the controller: no.
    let mut not_controller = own.clone();
    not_controller.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false);
    assert!(current_remote(Some(&s.metadata), Some(&not_controller)).is_none());
    let mut other_kind = own.clone();
    other_kind.metadata.owner_references.as_mut().unwrap()[0].kind = "ReplicaSet".into();
    assert!(current_remote(Some(&s.metadata), Some(&other_kind)).is_none());
    assert!(current_remote(None, Some(&own)).is_none());
}

#[test]
fn without_the_ipam_everything_but_the_status_still_happens() {
    let ids = ids();
    let r = remote(&ids);
    let remote_ips = ["10.244.0.9".to_owned()];
    // A terminating pod: the ShadowPod deletion needs no IP.
    let l = terminating(local());
    let s = shadow_of(&local(), &ids);
    let got = decide(Some(&l), mapped(Some(&s), Some(&r)), &ctx(&ids, &[]));
    assert_eq!(
        got,
        [Action::DeleteShadow {
            uid: "u-shadow".into()
        }]
    );
    assert!(!needs_ips(&got, &remote_ips));
    // A live pod whose ShadowPod is stale and whose status is due: without IPs, the apply and
    // the label (which the status write was to carry) happen, the status waits.
    let mut l = local();
    l.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    let mut older = l.clone();
    older.spec.as_mut().unwrap().containers[0].image = Some("nginx:0".into());
    let mut stale = shadow_of(&older, &ids);
    stale.metadata.creation_timestamp = Some(created(1));
    let got = decide(Some(&l), mapped(Some(&stale), Some(&r)), &ctx(&ids, &[]));
    assert!(
        matches!(
            &got[..],
            [
                Action::UpdateShadow(_),
                Action::WriteStatus { label: true, .. }
            ]
        ),
        "{got:?}"
    );
    assert!(needs_ips(&got, &remote_ips));
    assert!(!needs_ips(&got, &[]), "no remote IP: nothing to map");
    let kept = without_status(got);
    assert!(
        matches!(&kept[..], [Action::UpdateShadow(_), Action::LabelLocal]),
        "{kept:?}"
    );
}

#[test]
fn a_shadow_pod_whose_pod_does_not_come_has_its_name_probed_after_a_while() {
    let ids = ids();
    let l = local();
    let mut s = shadow_of(&l, &ids);
    s.metadata.creation_timestamp = Some(created(10));
    assert_eq!(
        probe_foreign(Some(&s.metadata), None, &now()),
        Some(PROBE_AFTER - std::time::Duration::from_secs(10))
    );
    s.metadata.creation_timestamp = Some(created(45));
    assert_eq!(
        probe_foreign(Some(&s.metadata), None, &now()),
        Some(std::time::Duration::ZERO)
    );
    // Its pod is there, no ShadowPod, or the ShadowPod goes: never.
    let r = remote(&ids);
    assert_eq!(probe_foreign(Some(&s.metadata), Some(&r), &now()), None);
    assert_eq!(probe_foreign(None, None, &now()), None);
    s.metadata.deletion_timestamp = Some(now());
    assert_eq!(probe_foreign(Some(&s.metadata), None, &now()), None);
}

#[test]
fn the_label_rides_on_the_first_status_write_or_goes_alone_after_a_while() {
    let ids = ids();
    let c = ctx(&ids, &[]);
    let mut l = local();
    l.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    let mut s = shadow_of(&l, &ids);
    s.metadata.creation_timestamp = Some(created(10));
    // A remote pod with nothing to say yet: no write; the pod is to be seen again when its
    // ShadowPod is LABEL_AFTER old.
    let mut quiet = remote(&ids);
    quiet.status = None;
    let got = decide(Some(&l), mapped(Some(&s), Some(&quiet)), &c);
    assert_eq!(got, [], "{got:?}");
    assert_eq!(
        label_in(&l, Some(&s.metadata), &c),
        Some(LABEL_AFTER - std::time::Duration::from_secs(10))
    );
    // A status to write: one request, the label with it.
    let r = remote(&ids);
    let ips = ["10.201.0.9".to_owned()];
    let got = decide(Some(&l), mapped(Some(&s), Some(&r)), &ctx(&ids, &ips));
    assert!(
        matches!(&got[..], [Action::WriteStatus { label: true, .. }]),
        "{got:?}"
    );
    // Once the ShadowPod is LABEL_AFTER old the label goes alone: with nothing to say, or
    // beside a status (whose write may be what keeps failing).
    s.metadata.creation_timestamp = Some(created(LABEL_AFTER.as_secs() as i64 + 15));
    assert_eq!(
        label_in(&l, Some(&s.metadata), &c),
        Some(std::time::Duration::ZERO)
    );
    let got = decide(Some(&l), mapped(Some(&s), Some(&quiet)), &c);
    assert_eq!(got, [Action::LabelLocal]);
    let got = decide(Some(&l), mapped(Some(&s), Some(&r)), &ctx(&ids, &ips));
    assert!(
        matches!(
            &got[..],
            [Action::WriteStatus { label: false, .. }, Action::LabelLocal]
        ),
        "{got:?}"
    );
    // Labelled, no ShadowPod, either going, a ShadowPod not ours, an aborted pod: never alone.
    let labelled = local();
    assert_eq!(label_in(&labelled, Some(&s.metadata), &c), None);
    let got = decide(
        Some(&labelled),
        mapped(Some(&s), Some(&r)),
        &ctx(&ids, &ips),
    );
    assert!(
        matches!(&got[..], [Action::WriteStatus { label: false, .. }]),
        "{got:?}"
    );
    assert_eq!(label_in(&l, None, &c), None);
    assert_eq!(
        label_in(&terminating(l.clone()), Some(&s.metadata), &c),
        None
    );
    let mut theirs = s.clone();
    theirs.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    assert_eq!(label_in(&l, Some(&theirs.metadata), &c), None);
    let mut aborted = l.clone();
    aborted.status = Some(
        serde_json::from_value(serde_json::json!({
            "phase": "Failed", "reason": "OffloadingAborted"
        }))
        .unwrap(),
    );
    assert_eq!(label_in(&aborted, Some(&s.metadata), &c), None);
    s.metadata.deletion_timestamp = Some(now());
    assert_eq!(label_in(&l, Some(&s.metadata), &c), None);
}

#[test]
fn a_remote_pod_saying_only_pending_and_scheduled_is_not_written_back() {
    let ids = ids();
    let with_status = |p: &mut k8s_openapi::api::core::v1::Pod, status: serde_json::Value| {
        p.status = Some(serde_json::from_value(status).unwrap());
    };
    let scheduled = serde_json::json!({"phase": "Pending", "qosClass": "BestEffort",
        "conditions": [{"type": "PodScheduled", "status": "True",
                        "lastTransitionTime": "2026-03-04T05:06:00Z"}]});
    // The home pod as its scheduler left it.
    let mut l = local();
    with_status(&mut l, scheduled.clone());
    let s = shadow_of(&l, &ids);
    let mut r = remote(&ids);
    let decided = |l: &k8s_openapi::api::core::v1::Pod, r: &k8s_openapi::api::core::v1::Pod| {
        decide(Some(l), mapped(Some(&s), Some(r)), &ctx(&ids, &[]))
    };
    // The remote pod just created, then bound (other times): nothing new to say.
    with_status(
        &mut r,
        serde_json::json!({"phase": "Pending", "qosClass": "BestEffort"}),
    );
    assert_eq!(decided(&l, &r), []);
    let mut bound = scheduled.clone();
    bound["conditions"][0]["lastTransitionTime"] = "2026-03-04T05:06:07Z".into();
    with_status(&mut r, bound.clone());
    assert_eq!(decided(&l, &r), []);
    // Unschedulable there: written (the provider has no room).
    with_status(
        &mut r,
        serde_json::json!({"phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}),
    );
    let got = decided(&l, &r);
    let [
        Action::WriteStatus {
            status: unschedulable,
            ..
        },
    ] = &got[..]
    else {
        panic!("{got:?}")
    };
    // Then scheduled there: the home pod says Unschedulable, so that is written too.
    l.status = Some((**unschedulable).clone());
    with_status(&mut r, bound);
    assert!(matches!(&decided(&l, &r)[..], [Action::WriteStatus { .. }]));
    // A home pod that said more (Running, from a remote pod since replaced): the new remote
    // pod's "Pending, scheduled" is written.
    let mut was_running = l.clone();
    with_status(&mut was_running, serde_json::json!({"phase": "Running"}));
    with_status(
        &mut r,
        serde_json::json!({"phase": "Pending", "qosClass": "BestEffort"}),
    );
    assert!(matches!(
        &decided(&was_running, &r)[..],
        [Action::WriteStatus { .. }]
    ));
    // A container waiting (news from the provider's kubelet): written.
    with_status(&mut l, scheduled);
    with_status(
        &mut r,
        serde_json::json!({"phase": "Pending",
        "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": false,
                               "restartCount": 0,
                               "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
    );
    assert!(matches!(&decided(&l, &r)[..], [Action::WriteStatus { .. }]));
}

#[test]
fn namesakes_not_ours_are_warned_about_for_a_live_pod_and_as_if_absent_for_one_going() {
    let ids = ids();
    let l = local();
    // A remote Pod and a ShadowPod of the name made by someone else (no reflection labels).
    let mut theirs = remote(&ids);
    theirs.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    let mut their_shadow = shadow_of(&l, &ids);
    their_shadow.metadata.labels = None;
    let got = decide(Some(&l), mapped(None, Some(&theirs)), &ctx(&ids, &[]));
    assert!(
        matches!(&got[..], [Action::Warn { note, .. }] if note.starts_with("remote Pod ")),
        "{got:?}"
    );
    let got = decide(Some(&l), mapped(Some(&their_shadow), None), &ctx(&ids, &[]));
    assert!(
        matches!(&got[..], [Action::Warn { note, .. }] if note.starts_with("remote ShadowPod ")),
        "{got:?}"
    );
    // Going: nothing of ours is there, so its deletion finishes and its records go.
    let t = terminating(local());
    let expect = [
        Action::DeleteLocal {
            uid: "u-local".into(),
        },
        Action::Forget,
    ];
    assert_eq!(
        decide(
            Some(&t),
            mapped(Some(&their_shadow), Some(&theirs)),
            &ctx(&ids, &[])
        ),
        expect
    );
    // Going beside our ShadowPod whose remote namesake is not ours: ours is deleted first.
    let ours = shadow_of(&l, &ids);
    assert_eq!(
        decide(
            Some(&t),
            mapped(Some(&ours), Some(&theirs)),
            &ctx(&ids, &[])
        ),
        [Action::DeleteShadow {
            uid: "u-shadow".into()
        }]
    );
    // Gone: its records are forgotten (they were kept forever before).
    assert_eq!(
        decide(
            None,
            mapped(Some(&their_shadow), Some(&theirs)),
            &ctx(&ids, &[])
        ),
        [Action::Forget]
    );
}

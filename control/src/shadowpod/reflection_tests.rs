//! [`decide`](super::reflection::decide): §2.3 steps 1–7 and the fallback, case by case.

use crate::{api::ClusterId, api::virtualkubelet::ShadowPod, shadowpod::consumer as forge};
use k8s_openapi::{
    api::core::v1::{Pod, PodStatus},
    apimachinery::pkg::apis::meta::v1::Time,
};
use serde_json::json;

use super::reflection::{Action, Context, Restarts, Target, decide, track_restarts};

const HOME: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const FOREIGN: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
const NS: &str = "demo-rome";

pub(super) struct Ids {
    pub(super) home: ClusterId,
    pub(super) foreign: ClusterId,
}

pub(super) fn ids() -> Ids {
    Ids {
        home: HOME.parse().unwrap(),
        foreign: FOREIGN.parse().unwrap(),
    }
}

pub(super) fn now() -> Time {
    Time("2026-03-04T05:06:07Z".parse().unwrap())
}

pub(super) fn ctx<'a>(ids: &'a Ids, ips: &'a [String]) -> Context<'a> {
    Context {
        home: &ids.home,
        foreign: &ids.foreign,
        node_ip: "127.0.0.1",
        api: None,
        pod_ips: ips,
        restarts: 0,
        now: now(),
    }
}

pub(super) fn local() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "demo", "uid": "u-local",
                     "labels": {"app": "web", "liqo.io/shadowPod": "true"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "liqo-milan"},
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

pub(super) fn terminating(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(now());
    p
}

/// The ShadowPod of `local` as the virtual kubelet's store holds it (`crate::lean::shadow`).
pub(super) fn shadow_of(local: &Pod, ids: &Ids) -> ShadowPod {
    let mut s = forge::shadow_pod(local, NS, &ids.home, &ids.foreign, None);
    s.metadata.uid = Some("u-shadow".into());
    crate::lean::shadow(&mut s.metadata);
    s
}

pub(super) fn remote(ids: &Ids) -> Pod {
    let mut p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": NS, "uid": "u-remote",
                     "labels": {"app": "web", "liqo.io/managed-by": "shadowpod"},
                     "ownerReferences": [{"apiVersion": "virtualkubelet.liqo.io/v1alpha1",
                                          "kind": "ShadowPod", "name": "web", "uid": "u-shadow",
                                          "controller": true}]},
        "status": {"phase": "Running", "podIP": "10.244.0.9", "podIPs": [{"ip": "10.244.0.9"}],
                   "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "",
                                          "ready": true, "restartCount": 0}]}
    }))
    .unwrap();
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .extend(forge::reflection_labels(&ids.home, &ids.foreign));
    p
}

pub(super) fn mapped<'a>(shadow: Option<&'a ShadowPod>, remote: Option<&'a Pod>) -> Target<'a> {
    Target::Mapped {
        namespace: NS,
        shadow: shadow.map(|s| &s.metadata),
        remote,
    }
}

#[test]
fn a_new_pod_gets_its_shadow_pod_and_no_write_at_home() {
    let ids = ids();
    let mut l = local();
    l.metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("liqo.io/shadowPod");
    let got = decide(Some(&l), mapped(None, None), &ctx(&ids, &[]));
    // The ShadowPod only: the pod waits for it; its label comes with its first status.
    let [Action::CreateShadow(s)] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(s.metadata.namespace.as_deref(), Some(NS));
    assert_eq!(s.metadata.name.as_deref(), Some("web"));
    assert!(forge::is_reflected(
        s.metadata.labels.as_ref(),
        &ids.home,
        &ids.foreign
    ));
    assert!(
        !s.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("liqo.io/shadowPod")
    );
}

#[test]
fn an_up_to_date_shadow_pod_is_left_alone_and_a_stale_one_is_applied() {
    let ids = ids();
    let l = local();
    let s = shadow_of(&l, &ids);
    assert_eq!(
        decide(Some(&l), mapped(Some(&s), None), &ctx(&ids, &[])),
        []
    );
    let mut changed = l.clone();
    changed.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    let got = decide(Some(&changed), mapped(Some(&s), None), &ctx(&ids, &[]));
    assert!(
        matches!(&got[..], [Action::UpdateShadow(n)] if n.spec.pod.containers[0].image.as_deref() == Some("nginx:2")),
        "{got:?}"
    );
    let mut relabelled = l.clone();
    relabelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("tier".into(), "front".into());
    let got = decide(Some(&relabelled), mapped(Some(&s), None), &ctx(&ids, &[]));
    assert!(matches!(&got[..], [Action::UpdateShadow(_)]), "{got:?}");
    let mut annotated = l.clone();
    annotated.metadata.annotations = Some([("note".to_owned(), "x".to_owned())].into());
    let got = decide(Some(&annotated), mapped(Some(&s), None), &ctx(&ids, &[]));
    assert!(matches!(&got[..], [Action::UpdateShadow(_)]), "{got:?}");
}

#[test]
fn a_shadow_pod_without_a_digest_is_forged_again_once() {
    let ids = ids();
    let l = local();
    let mut old = shadow_of(&l, &ids);
    old.metadata.annotations = None;
    let got = decide(Some(&l), mapped(Some(&old), None), &ctx(&ids, &[]));
    let [Action::UpdateShadow(n)] = &got[..] else {
        panic!("{got:?}")
    };
    // Once applied, its store copy has the digest: nothing more.
    let mut applied = (**n).clone();
    applied.metadata.uid = Some("u-shadow".into());
    crate::lean::shadow(&mut applied.metadata);
    assert_eq!(
        decide(Some(&l), mapped(Some(&applied), None), &ctx(&ids, &[])),
        []
    );
}

#[test]
fn the_digest_follows_labels_annotations_and_spec_and_nothing_else() {
    let ids = ids();
    let l = local();
    let digest = |p: &Pod| {
        forge::shadow_pod(p, NS, &ids.home, &ids.foreign, None)
            .metadata
            .annotations
            .unwrap()[crate::consts::reflection::SHADOW_DIGEST]
            .clone()
    };
    let base = digest(&l);
    assert_eq!(base.len(), 32);
    let mut status_only = l.clone();
    status_only.status = Some(Default::default());
    status_only.metadata.resource_version = Some("42".into());
    assert_eq!(digest(&status_only), base);
    // A digest the local pod carries (copied by hand) is not taken as its own.
    let mut copied = l.clone();
    copied.metadata.annotations = Some(
        [(
            crate::consts::reflection::SHADOW_DIGEST.to_owned(),
            "forged".to_owned(),
        )]
        .into(),
    );
    assert_eq!(digest(&copied), base);
    let mut imaged = l.clone();
    imaged.spec.as_mut().unwrap().containers[0].image = Some("nginx:9".into());
    assert_ne!(digest(&imaged), base);
}

#[test]
fn objects_without_our_labels_are_never_touched_and_the_local_pod_gets_a_warning() {
    let ids = ids();
    let l = local();
    let mut theirs = shadow_of(&l, &ids);
    theirs.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    let got = decide(Some(&l), mapped(Some(&theirs), None), &ctx(&ids, &[]));
    assert!(
        matches!(&got[..], [Action::Warn { reason: "FailedReflection", note }] if note.contains("ShadowPod demo-rome/web")),
        "{got:?}"
    );
    let mut their_pod = remote(&ids);
    their_pod.metadata.labels = None;
    let got = decide(Some(&l), mapped(None, Some(&their_pod)), &ctx(&ids, &[]));
    assert!(matches!(&got[..], [Action::Warn { .. }]), "{got:?}");
    // Local gone: nothing is touched, not even deleted; only our records are forgotten.
    assert_eq!(
        decide(None, mapped(Some(&theirs), None), &ctx(&ids, &[])),
        [Action::Forget]
    );
}

#[test]
fn a_deleted_local_pod_deletes_its_shadow_pod_by_uid() {
    let ids = ids();
    let s = shadow_of(&local(), &ids);
    assert_eq!(
        decide(None, mapped(Some(&s), None), &ctx(&ids, &[])),
        [
            Action::DeleteShadow {
                uid: "u-shadow".into()
            },
            Action::Forget
        ]
    );
    let mut going = s.clone();
    going.metadata.deletion_timestamp = Some(now());
    assert_eq!(
        decide(None, mapped(Some(&going), None), &ctx(&ids, &[])),
        [Action::Forget]
    );
    assert_eq!(
        decide(None, mapped(None, None), &ctx(&ids, &[])),
        [Action::Forget]
    );
}

#[test]
fn a_terminating_local_pod_goes_shadow_first_then_itself() {
    let ids = ids();
    let l = terminating(local());
    let s = shadow_of(&local(), &ids);
    let r = remote(&ids);
    assert_eq!(
        decide(Some(&l), mapped(Some(&s), Some(&r)), &ctx(&ids, &[])),
        [Action::DeleteShadow {
            uid: "u-shadow".into()
        }]
    );
    // ShadowPod going, remote pod still there: its status mirrored.
    let mut going = s.clone();
    going.metadata.deletion_timestamp = Some(now());
    let ips = ["10.201.0.9".to_owned()];
    let got = decide(Some(&l), mapped(Some(&going), Some(&r)), &ctx(&ids, &ips));
    assert!(
        matches!(&got[..], [Action::WriteStatus { status: st, .. }] if st.pod_ip.as_deref() == Some("10.201.0.9")),
        "{got:?}"
    );
    // ShadowPod gone, remote pod terminating: nothing proves it is this pod's, no status.
    assert_eq!(
        decide(Some(&l), mapped(None, Some(&r)), &ctx(&ids, &ips)),
        []
    );
    // Both gone: the local pod, grace 0, by UID.
    assert_eq!(
        decide(Some(&l), mapped(None, None), &ctx(&ids, &[])),
        [
            Action::DeleteLocal {
                uid: "u-local".into()
            },
            Action::Forget
        ]
    );
}

#[test]
fn an_aborted_pod_only_makes_sure_its_shadow_pod_is_gone() {
    let ids = ids();
    let mut l = local();
    l.status = Some(PodStatus {
        phase: Some("Failed".into()),
        reason: Some("OffloadingAborted".into()),
        ..PodStatus::default()
    });
    let s = shadow_of(&local(), &ids);
    assert_eq!(
        decide(Some(&l), mapped(Some(&s), None), &ctx(&ids, &[])),
        [Action::DeleteShadow {
            uid: "u-shadow".into()
        }]
    );
    assert_eq!(decide(Some(&l), mapped(None, None), &ctx(&ids, &[])), []);
}

#[test]
fn the_status_comes_back_with_mapped_ips_and_only_when_it_differs() {
    let ids = ids();
    let l = local();
    let s = shadow_of(&l, &ids);
    let r = remote(&ids);
    let ips = ["10.201.0.9".to_owned()];
    let mut c = ctx(&ids, &ips);
    c.restarts = 2;
    let got = decide(Some(&l), mapped(Some(&s), Some(&r)), &c);
    let [Action::WriteStatus { status: st, .. }] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.pod_ip.as_deref(), Some("10.201.0.9"));
    assert_eq!(st.host_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(st.container_statuses.as_ref().unwrap()[0].restart_count, 2);
    // Written: nothing more to do.
    let mut written = l.clone();
    written.status = Some((**st).clone());
    assert_eq!(decide(Some(&written), mapped(Some(&s), Some(&r)), &c), []);
    // No remote pod yet: no status.
    assert_eq!(decide(Some(&l), mapped(Some(&s), None), &c), []);
}

#[test]
fn a_live_pod_waits_while_an_old_shadow_pod_of_its_name_terminates() {
    let ids = ids();
    let l = local();
    let mut s = shadow_of(&l, &ids);
    s.metadata.deletion_timestamp = Some(now());
    let r = remote(&ids);
    assert_eq!(
        decide(Some(&l), mapped(Some(&s), Some(&r)), &ctx(&ids, &[])),
        []
    );
}

#[test]
fn the_fallback_rejects_pods_in_namespaces_not_offloaded_here() {
    let ids = ids();
    let l = local();
    let got = decide(Some(&l), Target::Unmapped, &ctx(&ids, &[]));
    let [Action::WriteStatus { status: st, .. }] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert_eq!(st.reason.as_deref(), Some("OffloadingBackOff"));
    // Written once: nothing more.
    let mut backed_off = l.clone();
    backed_off.status = Some((**st).clone());
    assert_eq!(
        decide(Some(&backed_off), Target::Unmapped, &ctx(&ids, &[])),
        []
    );
    // A pod that ran: Failed/OffloadingAborted, its Ready condition false.
    let mut ran = l.clone();
    ran.status = Some(
        serde_json::from_value(json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}))
        .unwrap(),
    );
    let got = decide(Some(&ran), Target::Unmapped, &ctx(&ids, &[]));
    let [Action::WriteStatus { status: st, .. }] = &got[..] else {
        panic!("{got:?}")
    };
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("OffloadingAborted"));
    assert_eq!(st.conditions.as_ref().unwrap()[0].status, "False");
    // Succeeded: left alone; terminating: deleted with grace 0; gone: forgotten.
    let mut done = l.clone();
    done.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..PodStatus::default()
    });
    assert_eq!(decide(Some(&done), Target::Unmapped, &ctx(&ids, &[])), []);
    assert_eq!(
        decide(Some(&terminating(l)), Target::Unmapped, &ctx(&ids, &[])),
        [Action::DeleteLocal {
            uid: "u-local".into()
        }]
    );
    assert_eq!(
        decide(None, Target::Unmapped, &ctx(&ids, &[])),
        [Action::Forget]
    );
}

#[test]
fn restarts_grow_with_each_new_remote_uid_and_are_inferred_at_first_sight() {
    let ids = ids();
    let r = remote(&ids);
    let local_status: PodStatus = serde_json::from_value(json!({
        "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": true, "restartCount": 3}]
    }))
    .unwrap();
    // First sighting after a restart of the virtual kubelet: local 3 − remote 0.
    let first = track_restarts(None, &local_status, &r);
    assert_eq!(
        first,
        Restarts {
            remote_uid: Some("u-remote".into()),
            count: 3
        }
    );
    // Same remote pod: unchanged.
    assert_eq!(track_restarts(Some(&first), &local_status, &r), first);
    // A new remote pod: one more.
    let mut replaced = r.clone();
    replaced.metadata.uid = Some("u-remote-2".into());
    let second = track_restarts(Some(&first), &local_status, &replaced);
    assert_eq!(
        second,
        Restarts {
            remote_uid: Some("u-remote-2".into()),
            count: 4
        }
    );
    // A fresh pod (no local status yet): zero.
    assert_eq!(track_restarts(None, &PodStatus::default(), &r).count, 0);
}

#[test]
fn the_status_patch_sets_the_target_and_clears_what_only_the_current_has() {
    let current: PodStatus = serde_json::from_value(json!({
        "phase": "Pending", "reason": "OffloadingBackOff", "message": "x",
        "conditions": [{"type": "PodScheduled", "status": "True"}]
    }))
    .unwrap();
    let target: PodStatus = serde_json::from_value(json!({
        "phase": "Running", "podIP": "10.0.0.1",
        "conditions": [{"type": "Ready", "status": "True"}]
    }))
    .unwrap();
    assert_eq!(
        super::reflection::status_patch(&current, &target),
        json!({"phase": "Running", "podIP": "10.0.0.1", "reason": null, "message": null,
               "conditions": [{"type": "Ready", "status": "True"}]})
    );
}

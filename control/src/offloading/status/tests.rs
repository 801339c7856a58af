//! Tests of the NamespaceOffloading status: the seed's example reproduced exactly, the condition
//! table, the phase table, lastTransitionTime, deletion.

use std::fmt::Write;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;

fn at(rfc3339: &str) -> Time {
    Time(rfc3339.parse::<Timestamp>().unwrap())
}

fn cluster(map: &str, requested: bool, phase: Option<MappingPhase>) -> ClusterState<'_> {
    ClusterState {
        map,
        requested,
        phase,
        failure: None,
    }
}

/// Type, status, reason and message of each cluster's conditions, in order.
fn summary(s: &NamespaceOffloadingStatus) -> String {
    let mut text = format!("{:?}\n", s.offloading_phase);
    for (map, list) in &s.remote_namespaces_conditions {
        for c in list {
            let (reason, message) = (c.reason.as_deref(), c.message.as_deref());
            let (reason, message) = (reason.unwrap_or("-"), message.unwrap_or("-"));
            writeln!(
                text,
                "{map}: {:?} {:?} {reason}: {message}",
                c.type_, c.status
            )
            .unwrap();
        }
    }
    text
}

/// Acceptance point 1's contract: the seed's example (§13.3), florence not selected, naples
/// selected and accepted, reproduced exactly (the seed's cluster IDs give its UniqueNames; the
/// two passes give its two times).
#[test]
fn reproduces_the_seeds_example() {
    // First pass: only florence's map exists, and the selector does not match it.
    let first = status(
        &NamespaceOffloadingStatus::default(),
        &[cluster("florence-539f8b", false, None)],
        false,
        Some("liqo-demo"),
        Some(1),
        &at("2022-05-05T15:08:33Z"),
    );
    assert_eq!(
        first.offloading_phase,
        Some(OffloadingPhase::NoClusterSelected)
    );
    // Second pass: naples's map appears, selected, and already reports the namespace.
    let second = status(
        &first,
        &[
            cluster("florence-539f8b", false, None),
            cluster("naples-7881be", true, Some(MappingPhase::Accepted)),
        ],
        false,
        Some("liqo-demo"),
        Some(1),
        &at("2022-05-05T15:08:43Z"),
    );
    let seed = json!({
      "offloadingPhase": "Ready",
      "remoteNamespaceName": "liqo-demo",
      "remoteNamespacesConditions": {
        "florence-539f8b": [{
          "lastTransitionTime": "2022-05-05T15:08:33Z",
          "message": "You have not selected this cluster through ClusterSelector fields",
          "reason": "ClusterNotSelected",
          "status": "False",
          "type": "OffloadingRequired"
        }],
        "naples-7881be": [{
          "lastTransitionTime": "2022-05-05T15:08:43Z",
          "message": "The remote cluster has been selected through the ClusterSelector field",
          "reason": "ClusterSelected",
          "status": "True",
          "type": "OffloadingRequired"
        }, {
          "lastTransitionTime": "2022-05-05T15:08:43Z",
          "message": "Namespace correctly offloaded on this cluster",
          "reason": "RemoteNamespaceCreated",
          "status": "True",
          "type": "Ready"
        }]
      },
      "observedGeneration": 1
    });
    assert_eq!(serde_json::to_value(&second).unwrap(), seed);
    insta::assert_json_snapshot!(second);
}

#[test]
fn table_is_the_seeds_and_upstreams() {
    let mut text = String::new();
    for r in ROWS {
        writeln!(
            text,
            "{:?} {:?} {}: {}",
            r.type_, r.status, r.reason, r.message
        )
        .unwrap();
    }
    insta::assert_snapshot!(text);
}

#[test]
fn phase_table_first_match_wins() {
    use OffloadingPhase::*;
    // (deleting, required, ready, failed) → phase
    let cases = [
        ((true, 0, 0, 0), Terminating),
        ((true, 2, 2, 0), Terminating),
        ((false, 0, 0, 0), NoClusterSelected),
        ((false, 2, 2, 0), Ready),
        ((false, 2, 0, 2), AllFailed),
        ((false, 1, 0, 1), AllFailed),
        ((false, 2, 1, 1), SomeFailed),
        ((false, 3, 0, 1), SomeFailed),
        ((false, 2, 1, 0), InProgress),
        ((false, 2, 0, 0), InProgress),
    ];
    for ((d, req, ready, failed), want) in cases {
        assert_eq!(
            phase(d, req, ready, failed),
            want,
            "{d} {req} {ready} {failed}"
        );
    }
}

#[test]
fn each_mapping_phase_gives_its_ready_row() {
    let now = at("2024-01-01T00:00:00Z");
    let clusters = [
        cluster("a-000001", true, None),
        cluster("b-000002", true, Some(MappingPhase::Accepted)),
        cluster("c-000003", true, Some(MappingPhase::CreationLoopBackOff)),
        cluster("d-000004", true, Some(MappingPhase::Terminating)),
        // No longer selected, its map still reports the namespace being deleted.
        cluster("e-000005", false, Some(MappingPhase::Terminating)),
        // Not selected, nothing reported: OffloadingRequired only.
        cluster("f-000006", false, None),
    ];
    let s = status(&Default::default(), &clusters, false, Some("x"), None, &now);
    insta::assert_snapshot!(summary(&s));
    // 4 required, 1 ready, 1 failed.
    assert_eq!(s.offloading_phase, Some(OffloadingPhase::SomeFailed));
}

#[test]
fn failure_overrides_the_message_of_required_clusters_only() {
    let now = at("2024-01-01T00:00:00Z");
    let why = "\"x-long\" is not a valid DNS-1123 label: is 64 characters long (at most 63)";
    let mut selected = cluster("a-000001", true, None);
    selected.failure = Some(why);
    let mut other = cluster("b-000002", false, None);
    other.failure = Some(why);
    let s = status(
        &Default::default(),
        &[selected, other],
        false,
        None,
        None,
        &now,
    );
    let a = &s.remote_namespaces_conditions["a-000001"];
    assert_eq!(a[1].reason.as_deref(), Some("CreationLoopBackOff"));
    assert_eq!(a[1].message.as_deref(), Some(why));
    assert_eq!(s.remote_namespaces_conditions["b-000002"].len(), 1);
    assert_eq!(s.offloading_phase, Some(OffloadingPhase::AllFailed));
    assert_eq!(s.remote_namespace_name, None);
}

#[test]
fn transition_time_changes_only_with_status() {
    let t0 = at("2024-01-01T00:00:00Z");
    let t1 = at("2024-01-01T00:00:10Z");
    let t2 = at("2024-01-01T00:00:20Z");
    let s0 = status(
        &Default::default(),
        &[cluster("a-1", true, None)],
        false,
        None,
        None,
        &t0,
    );
    // Creating → CreationLoopBackOff: both Ready False, time kept; reason and message follow.
    let s1 = status(
        &s0,
        &[cluster(
            "a-1",
            true,
            Some(MappingPhase::CreationLoopBackOff),
        )],
        false,
        None,
        None,
        &t1,
    );
    let ready = &s1.remote_namespaces_conditions["a-1"][1];
    assert_eq!(ready.reason.as_deref(), Some("CreationLoopBackOff"));
    assert_eq!(ready.last_transition_time, Some(t0.clone()));
    assert_eq!(
        s1.remote_namespaces_conditions["a-1"][0].last_transition_time,
        Some(t0.clone())
    );
    // → Accepted: Ready True, new time; OffloadingRequired unchanged, time kept.
    let s2 = status(
        &s1,
        &[cluster("a-1", true, Some(MappingPhase::Accepted))],
        false,
        None,
        None,
        &t2,
    );
    let list = &s2.remote_namespaces_conditions["a-1"];
    assert_eq!(list[0].last_transition_time, Some(t0));
    assert_eq!(list[1].last_transition_time, Some(t2.clone()));
    // Same input again: identical status (idempotent).
    let s3 = status(
        &s2,
        &[cluster("a-1", true, Some(MappingPhase::Accepted))],
        false,
        None,
        None,
        &at("2024-01-01T00:01:00Z"),
    );
    assert_eq!(s3, s2);
}

#[test]
fn deleting_keeps_only_what_is_still_reported() {
    let now = at("2024-01-01T00:00:00Z");
    let old = status(
        &Default::default(),
        &[
            cluster("a-1", true, Some(MappingPhase::Accepted)),
            cluster("b-2", false, None),
            cluster("gone-3", true, Some(MappingPhase::Accepted)),
        ],
        false,
        Some("x"),
        Some(2),
        &now,
    );
    // Deleting: desired entries removed, a's map reports Terminating, b's nothing, gone's map
    // has vanished.
    let s = status(
        &old,
        &[
            cluster("a-1", false, Some(MappingPhase::Terminating)),
            cluster("b-2", false, None),
        ],
        true,
        Some("x"),
        Some(2),
        &now,
    );
    assert_eq!(s.offloading_phase, Some(OffloadingPhase::Terminating));
    let keys: Vec<&String> = s.remote_namespaces_conditions.keys().collect();
    assert_eq!(keys, ["a-1"]);
    insta::assert_snapshot!(summary(&s));
    // Once a's map drops the entry, nothing is left (the finalizer may go).
    let done = status(
        &s,
        &[cluster("a-1", false, None)],
        true,
        Some("x"),
        Some(2),
        &now,
    );
    assert!(done.remote_namespaces_conditions.is_empty());
}

use control::{
    api::discovery::ForeignClusterStatus,
    conditions::{
        Authentication as A, Condition as C, Network as N, Peering as P, Process as R, set,
    },
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use super::*;

fn status(conds: &[C]) -> ForeignClusterStatus {
    let now = Time(Timestamp::UNIX_EPOCH);
    let mut s = ForeignClusterStatus::default();
    for c in conds {
        set(&mut s.peering_conditions, *c, &now);
    }
    s
}

fn progress(conds: &[C], node: NodeState) -> Progress {
    peering(Some(&status(conds)), node, None)
}

fn waiting_for(p: &Progress) -> Option<Stage> {
    match &p.outcome {
        Outcome::Waiting(s, _) => Some(*s),
        _ => None,
    }
}

#[test]
fn a_refusal_older_than_our_write_answered_an_earlier_attempt() {
    // The conditions were set at the epoch (see `status`).
    let denied = status(&[C::Authentication(A::Denied)]);
    let later = Time(Timestamp::from_second(1_000).unwrap());
    let since = |at, retried| Some(Since { at, retried });
    for retried in [false, true] {
        let p = peering(Some(&denied), NodeState::Absent, since(&later, retried));
        assert_eq!(
            waiting_for(&p),
            Some(Stage::Authentication),
            "stale: waited past"
        );
    }
    let same = Time(Timestamp::UNIX_EPOCH);
    let p = peering(Some(&denied), NodeState::Absent, since(&same, false));
    assert_eq!(
        waiting_for(&p),
        Some(Stage::Authentication),
        "the second of our write, no retry seen yet: maybe the earlier answer"
    );
    let p = peering(Some(&denied), NodeState::Absent, since(&same, true));
    assert!(
        matches!(p.outcome, Outcome::Failed(Stage::Authentication, _)),
        "the second of our write, after a retry: it answers it"
    );
    assert!(refused(Some(&denied)));
    assert!(refused(Some(&status(&[C::Authentication(
        A::WrongCluster
    )]))));
    assert!(!refused(Some(&status(&[C::Authentication(
        A::NotReachable
    )]))));
    assert!(!refused(Some(&status(&[C::Authentication(A::Pending)]))));
    assert!(!refused(None));
}

#[test]
fn no_status_waits_for_authentication() {
    let p = peering(None, NodeState::Absent, None);
    assert!(p.passed.is_empty());
    assert_eq!(waiting_for(&p), Some(Stage::Authentication));
    let p = progress(
        &[C::Process(R::Processable), C::Authentication(A::Pending)],
        NodeState::Absent,
    );
    assert_eq!(waiting_for(&p), Some(Stage::Authentication));
}

#[test]
fn authentication_refusals_fail_the_first_stage() {
    for a in [A::Denied, A::EmptyDenied, A::WrongCluster] {
        let p = progress(&[C::Authentication(a)], NodeState::Absent);
        let Outcome::Failed(Stage::Authentication, seen) = &p.outcome else {
            panic!("{a:?}: {:?}", p.outcome)
        };
        assert_eq!(seen.reason.as_deref(), Some(C::Authentication(a).reason()));
        assert!(p.passed.is_empty());
    }
}

#[test]
fn an_unreachable_auth_service_is_waited_for_and_named_at_the_timeout() {
    // A peer's auth service down for a moment (a restart, a load balancer coming up) is
    // retried by the controller: keep waiting, as upstream; the timeout line says what was seen.
    let p = progress(&[C::Authentication(A::NotReachable)], NodeState::Absent);
    let Outcome::Waiting(Stage::Authentication, Some(seen)) = &p.outcome else {
        panic!("{:?}", p.outcome)
    };
    assert_eq!(
        seen.reason.as_deref(),
        Some(C::Authentication(A::NotReachable).reason())
    );
}

#[test]
fn an_unprocessable_foreign_cluster_fails_where_it_stands() {
    let p = progress(&[C::Process(R::LocalCluster)], NodeState::Absent);
    let Outcome::Failed(Stage::Authentication, seen) = &p.outcome else {
        panic!("{:?}", p.outcome)
    };
    assert_eq!(seen.type_, T::ProcessForeignClusterStatus);
    assert_eq!(seen.reason.as_deref(), Some("LocalCluster"));
    let p = progress(
        &[
            C::Authentication(A::Accepted),
            C::Process(R::ClusterIdRepetition),
        ],
        NodeState::Absent,
    );
    assert_eq!(p.passed, [Passed::Authenticated]);
    assert!(matches!(p.outcome, Outcome::Failed(Stage::Network, _)));
}

#[test]
fn the_network_is_not_waited_for_while_unmanaged() {
    let p = progress(&[C::Authentication(A::Accepted)], NodeState::Absent);
    assert_eq!(p.passed, [Passed::Authenticated, Passed::NetworkNotManaged]);
    assert_eq!(waiting_for(&p), Some(Stage::OutgoingPeering));
    // Managed but not up yet, or failed: waited for.
    for n in [N::Connecting, N::Error] {
        let p = progress(
            &[C::Authentication(A::Accepted), C::Network(n)],
            NodeState::Absent,
        );
        assert_eq!(p.passed, [Passed::Authenticated], "{n:?}");
        assert_eq!(waiting_for(&p), Some(Stage::Network), "{n:?}");
    }
    let p = progress(
        &[C::Authentication(A::Accepted), C::Network(N::Available)],
        NodeState::Absent,
    );
    assert_eq!(
        p.passed,
        [Passed::Authenticated, Passed::NetworkEstablished]
    );
}

#[test]
fn outgoing_then_node_which_is_not_waited_for() {
    for o in [
        P::None,
        P::ResourceRequestPending,
        P::KubeletPending,
        P::Deleting,
    ] {
        let p = progress(
            &[C::Authentication(A::Accepted), C::Outgoing(o)],
            NodeState::Ready,
        );
        assert_eq!(waiting_for(&p), Some(Stage::OutgoingPeering), "{o:?}");
    }
    let done = |node| {
        progress(
            &[C::Authentication(A::Accepted), C::Outgoing(P::Accepted)],
            node,
        )
    };
    for (node, last) in [
        (NodeState::Absent, Passed::NodeNotCreated),
        (NodeState::NotReady, Passed::NodeNotCreated),
        (NodeState::Ready, Passed::NodeCreated),
    ] {
        let p = done(node);
        assert_eq!(p.outcome, Outcome::Done);
        assert_eq!(
            p.passed,
            [
                Passed::Authenticated,
                Passed::NetworkNotManaged,
                Passed::OutgoingActivated,
                last
            ]
        );
    }
}

#[test]
fn unpeering_waits_for_outgoing_none() {
    for o in [P::Accepted, P::Deleting, P::KubeletPending] {
        let p = unpeering(Some(&status(&[C::Outgoing(o)])));
        assert_eq!(waiting_for(&p), Some(Stage::OutgoingTeardown), "{o:?}");
    }
    for s in [None, Some(status(&[C::Outgoing(P::None)]))] {
        let p = unpeering(s.as_ref());
        assert_eq!(
            (p.passed, p.outcome),
            (vec![Passed::OutgoingDisabled], Outcome::Done)
        );
    }
}

/// What a peering prints, from the first event to established, and the failure and timeout
/// lines.
#[test]
fn printed_lines() {
    let mut lines = Vec::new();
    let mut printed = 0;
    let steps: [(&[C], NodeState); 4] = [
        (&[C::Process(R::Processable)], NodeState::Absent),
        (&[C::Authentication(A::Accepted)], NodeState::Absent),
        (
            &[
                C::Authentication(A::Accepted),
                C::Outgoing(P::KubeletPending),
            ],
            NodeState::Absent,
        ),
        (
            &[C::Authentication(A::Accepted), C::Outgoing(P::Accepted)],
            NodeState::Absent,
        ),
    ];
    for (conds, node) in steps {
        let p = progress(conds, node);
        for l in p.passed.iter().skip(printed) {
            lines.push(l.line("milan"));
        }
        printed = printed.max(p.passed.len());
    }
    let denied = progress(&[C::Authentication(A::Denied)], NodeState::Absent);
    let Outcome::Failed(stage, seen) = &denied.outcome else {
        panic!()
    };
    lines.push(failure_line(*stage, seen, "milan"));
    let local = progress(&[C::Process(R::LocalCluster)], NodeState::Absent);
    let Outcome::Failed(stage, seen) = &local.outcome else {
        panic!()
    };
    lines.push(failure_line(*stage, seen, "milan"));
    lines.push(timeout_line(Stage::Authentication, None, "milan", "3s"));
    let pending = progress(&[C::Authentication(A::Pending)], NodeState::Absent);
    let Outcome::Waiting(stage, seen) = &pending.outcome else {
        panic!()
    };
    lines.push(timeout_line(*stage, seen.as_ref(), "milan", "2m"));
    let tear = unpeering(Some(&status(&[C::Outgoing(P::Deleting)])));
    let Outcome::Waiting(stage, seen) = &tear.outcome else {
        panic!()
    };
    lines.push(timeout_line(*stage, seen.as_ref(), "milan", "2m"));
    lines.push(Passed::NetworkEstablished.line("milan"));
    lines.push(Passed::NodeCreated.line("milan"));
    lines.push(Passed::OutgoingDisabled.line("milan"));
    insta::assert_snapshot!(lines.join("\n"));
}

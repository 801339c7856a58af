use super::*;
use crate::api::discovery::OfferState;

fn id(s: &str) -> ClusterId {
    s.parse().unwrap()
}

pub(super) fn base() -> Observed {
    Observed {
        deleting: false,
        outgoing_enabled: PeeringEnabled::Yes,
        remote_tenant_known: true,
        request: None,
        offer_from_peer: None,
        request_from_peer: None,
        offer_to_peer: None,
        bound: BTreeSet::new(),
        tunnel: None,
        own_refused: None,
        now: "2026-01-01T00:00:00Z".parse().unwrap(),
    }
}

fn rr(withdrawing: bool, offer_state: OfferState, offer_withdrawn: bool) -> Option<RequestState> {
    Some(RequestState {
        deleting: false,
        withdrawing,
        offer_state,
        offer_withdrawn,
    })
}

fn conditions(actions: &[Action]) -> (Peering, Peering) {
    let mut out = None;
    let mut inc = None;
    for a in actions {
        match a {
            Action::SetCondition(Condition::Outgoing(p)) => out = Some(*p),
            Action::SetCondition(Condition::Incoming(p)) => inc = Some(*p),
            _ => {}
        }
    }
    (out.unwrap(), inc.unwrap())
}

#[test]
fn process_refuses_the_local_cluster_and_a_repeated_id() {
    let (a, b) = (id("aaa"), id("bbb"));
    assert_eq!(process(&a, &a, false), Process::LocalCluster);
    assert_eq!(process(&a, &a, true), Process::LocalCluster);
    assert_eq!(process(&a, &b, true), Process::ClusterIdRepetition);
    assert_eq!(process(&a, &b, false), Process::Processable);
}

#[test]
fn auth_steps_follow_the_identity_secret() {
    assert_eq!(
        auth_step(&IdentityState::Missing),
        AuthStep::CreateAndRequest
    );
    assert_eq!(auth_step(&IdentityState::Unsigned), AuthStep::Request);
    let signed = IdentityState::Signed {
        namespace: "liqo-tenant-rome-123456".into(),
    };
    assert_eq!(auth_step(&signed), AuthStep::Done);
}

/// (outgoing enabled, remote tenant known, request, offer copy, request action, condition).
type Case = (
    PeeringEnabled,
    bool,
    Option<RequestState>,
    Option<VirtualKubeletStatus>,
    Option<Action>,
    Peering,
);

#[test]
fn outgoing_table() {
    use VirtualKubeletStatus as V;
    // (outgoing enabled, remote tenant known, request, offer copy) -> (request action, condition)
    let cases: Vec<Case> = vec![
        (
            PeeringEnabled::Yes,
            true,
            None,
            None,
            Some(Action::ApplyRequest),
            Peering::ResourceRequestPending,
        ),
        (PeeringEnabled::Yes, false, None, None, None, Peering::None),
        (PeeringEnabled::Auto, true, None, None, None, Peering::None),
        (PeeringEnabled::No, true, None, None, None, Peering::None),
        (
            PeeringEnabled::Yes,
            true,
            rr(false, OfferState::None, false),
            None,
            Some(Action::ApplyRequest),
            Peering::ResourceRequestPending,
        ),
        (
            PeeringEnabled::Yes,
            true,
            rr(false, OfferState::Created, false),
            None,
            Some(Action::ApplyRequest),
            Peering::ResourceRequestPending,
        ),
        (
            PeeringEnabled::Yes,
            true,
            rr(false, OfferState::Created, false),
            Some(V::None),
            Some(Action::ApplyRequest),
            Peering::KubeletPending,
        ),
        (
            PeeringEnabled::Yes,
            true,
            rr(false, OfferState::Created, false),
            Some(V::Created),
            Some(Action::ApplyRequest),
            Peering::Accepted,
        ),
        // Wanted again while withdrawn: apply clears the withdrawal.
        (
            PeeringEnabled::Yes,
            true,
            rr(true, OfferState::Created, false),
            Some(V::Created),
            Some(Action::ApplyRequest),
            Peering::ResourceRequestPending,
        ),
        (
            PeeringEnabled::No,
            true,
            rr(false, OfferState::Created, false),
            Some(V::Created),
            Some(Action::WithdrawRequest),
            Peering::Deleting,
        ),
        (
            PeeringEnabled::No,
            true,
            rr(true, OfferState::Created, false),
            Some(V::Created),
            None,
            Peering::Deleting,
        ),
        (
            PeeringEnabled::No,
            true,
            rr(true, OfferState::None, true),
            None,
            Some(Action::DeleteRequest),
            Peering::Deleting,
        ),
        // Withdrawn, but the offer's copy is still here: wait (the peer deletes it with our role).
        (
            PeeringEnabled::No,
            true,
            rr(true, OfferState::None, true),
            Some(V::None),
            None,
            Peering::Deleting,
        ),
        // Never answered: nothing to wait for (Disconnecting until the request is gone).
        (
            PeeringEnabled::No,
            true,
            rr(true, OfferState::None, false),
            None,
            Some(Action::DeleteRequest),
            Peering::Deleting,
        ),
    ];
    for (i, (enabled, known, request, offer, action, cond)) in cases.into_iter().enumerate() {
        let o = Observed {
            outgoing_enabled: enabled,
            remote_tenant_known: known,
            request,
            offer_from_peer: offer,
            ..base()
        };
        let actions = decide(&o);
        let request_actions: Vec<&Action> = actions
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Action::ApplyRequest | Action::WithdrawRequest | Action::DeleteRequest
                )
            })
            .collect();
        assert_eq!(
            request_actions,
            action.iter().collect::<Vec<_>>(),
            "case {i}"
        );
        assert_eq!(conditions(&actions).0, cond, "case {i}");
    }
}

#[test]
fn a_deleted_foreign_cluster_withdraws() {
    let o = Observed {
        deleting: true,
        request: rr(false, OfferState::Created, false),
        offer_from_peer: Some(VirtualKubeletStatus::Created),
        ..base()
    };
    let actions = decide(&o);
    assert!(actions.contains(&Action::WithdrawRequest));
    assert_eq!(conditions(&actions).0, Peering::Deleting);
}

#[test]
fn incoming_follows_the_peer_request_and_our_offer() {
    use VirtualKubeletStatus as V;
    let cases = [
        (None, None, Peering::None),
        (
            rr(false, OfferState::None, false),
            None,
            Peering::ResourceRequestPending,
        ),
        (
            rr(false, OfferState::Created, false),
            Some(V::None),
            Peering::KubeletPending,
        ),
        (
            rr(false, OfferState::Created, false),
            Some(V::Created),
            Peering::Accepted,
        ),
        (
            rr(true, OfferState::Created, false),
            Some(V::Created),
            Peering::Deleting,
        ),
    ];
    for (i, (request, offer, want)) in cases.into_iter().enumerate() {
        let o = Observed {
            outgoing_enabled: PeeringEnabled::Auto,
            request_from_peer: request,
            offer_to_peer: offer,
            ..base()
        };
        assert_eq!(conditions(&decide(&o)).1, want, "case {i}");
    }
}

#[test]
fn roles_follow_the_phase() {
    // Outgoing only: bind outgoing; incoming stays unbound.
    let o = base();
    let a = decide(&o);
    assert!(a.contains(&Action::Bind(RoleSet::Outgoing)));
    assert!(
        !a.iter()
            .any(|a| matches!(a, Action::Bind(RoleSet::Incoming) | Action::Unbind(_)))
    );
    // Already bound: nothing to do.
    let o = Observed {
        bound: [RoleSet::Outgoing].into(),
        ..base()
    };
    assert!(
        !decide(&o)
            .iter()
            .any(|a| matches!(a, Action::Bind(_) | Action::Unbind(_)))
    );
    // Nothing active: both unbound, the basic set is never touched.
    let o = Observed {
        outgoing_enabled: PeeringEnabled::No,
        bound: [RoleSet::Basic, RoleSet::Outgoing, RoleSet::Incoming].into(),
        ..base()
    };
    let a = decide(&o);
    assert!(a.contains(&Action::Unbind(RoleSet::Outgoing)));
    assert!(a.contains(&Action::Unbind(RoleSet::Incoming)));
    assert!(!a.contains(&Action::Unbind(RoleSet::Basic)));
    // Bidirectional: both bound.
    let o = Observed {
        request_from_peer: rr(false, OfferState::None, false),
        ..base()
    };
    let a = decide(&o);
    assert!(a.contains(&Action::Bind(RoleSet::Outgoing)));
    assert!(a.contains(&Action::Bind(RoleSet::Incoming)));
}

/// §1.7 from the consumer's ForeignCluster: the decisions along the unpeer sequence, each
/// state being what the peer and the other controllers made of the previous decision.
#[test]
fn unpeer_order() {
    use VirtualKubeletStatus as V;
    let established = Observed {
        request: rr(false, OfferState::Created, false),
        offer_from_peer: Some(V::Created),
        bound: [RoleSet::Outgoing].into(),
        ..base()
    };
    assert_eq!(conditions(&decide(&established)).0, Peering::Accepted);
    // 1. outgoing No -> 2. stamp the withdrawal, Disconnecting; roles kept while disconnecting.
    let s1 = Observed {
        outgoing_enabled: PeeringEnabled::No,
        ..established.clone()
    };
    let a = decide(&s1);
    assert!(a.contains(&Action::WithdrawRequest));
    assert!(!a.contains(&Action::Unbind(RoleSet::Outgoing)));
    assert_eq!(conditions(&a).0, Peering::Deleting);
    // 3.-5. the offer is being withdrawn, the VK stopped: still waiting, nothing new.
    let s2 = Observed {
        request: rr(true, OfferState::Created, false),
        offer_from_peer: Some(V::None),
        ..s1.clone()
    };
    let a = decide(&s2);
    assert!(
        !a.iter()
            .any(|a| matches!(a, Action::WithdrawRequest | Action::DeleteRequest))
    );
    assert_eq!(conditions(&a).0, Peering::Deleting);
    // 6. the peer deleted the offer and stamped offerWithdrawalTimestamp -> 7. delete the RR.
    let s3 = Observed {
        request: rr(true, OfferState::None, true),
        offer_from_peer: None,
        ..s2.clone()
    };
    let a = decide(&s3);
    assert!(a.contains(&Action::DeleteRequest));
    // Still Disconnecting while the request is terminating (no flapping through None).
    assert_eq!(conditions(&a).0, Peering::Deleting);
    let s3b = Observed {
        request: Some(RequestState {
            deleting: true,
            ..s3.request.unwrap()
        }),
        ..s3.clone()
    };
    assert_eq!(conditions(&decide(&s3b)).0, Peering::Deleting);
    // The RR is gone: None, the outgoing role unbound.
    let a = decide(&Observed {
        request: None,
        ..s3.clone()
    });
    assert_eq!(conditions(&a).0, Peering::None);
    assert!(a.contains(&Action::Unbind(RoleSet::Outgoing)));
    let s4 = Observed {
        request: None,
        bound: BTreeSet::new(),
        ..s3
    };
    let a = decide(&s4);
    assert_eq!(conditions(&a), (Peering::None, Peering::None));
    // The two peering conditions and NetworkStatus (None without a TunnelEndpoint).
    assert_eq!(a.len(), 3);
    assert!(a.contains(&Action::SetNetwork(
        Condition::Network(Network::NotFound).into()
    )));
}

#[test]
fn a_failing_identity_request_backs_off() {
    use std::time::Duration;
    let base = Duration::from_secs(10);
    let waits: Vec<u64> = (1..=8)
        .map(|n| auth_retry_delay(n, base).as_secs())
        .collect();
    assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(auth_retry_delay(0, base), base);
    assert_eq!(auth_retry_delay(u32::MAX, base), AUTH_RETRY_MAX);
    let at = Timestamp::from_second(40).unwrap();
    assert_eq!(
        auth_failure_message("milan answered 403: no", 1, at),
        "milan answered 403: no; asking again at 1970-01-01T00:00:40Z"
    );
    assert_eq!(
        auth_failure_message("x", 3, at),
        "x; 3 attempts failed in a row, asking again at 1970-01-01T00:00:40Z"
    );
}

#[test]
fn only_a_discovered_foreign_cluster_without_peering_is_deleted() {
    use Peering as P;
    assert!(delete_discovered(true, false, P::None, P::None));
    assert!(!delete_discovered(false, false, P::None, P::None));
    assert!(!delete_discovered(true, true, P::None, P::None));
    assert!(!delete_discovered(true, false, P::None, P::Deleting));
    assert!(!delete_discovered(
        true,
        false,
        P::ResourceRequestPending,
        P::None
    ));
}

#[test]
fn only_a_new_live_peering_waits_for_a_terminating_tenant_namespace() {
    assert!(wait_for_tenant(true, false, false));
    // Not terminating; already named (its cleanup needs the name); being deleted.
    assert!(!wait_for_tenant(false, false, false));
    assert!(!wait_for_tenant(true, true, false));
    assert!(!wait_for_tenant(true, false, true));
}

use std::fmt::Write;

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::discovery::ForeignClusterStatus;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

/// The §1.3 table, row by row: type, status, reason.
#[test]
fn table_is_upstreams() {
    let mut text = String::new();
    for c in Condition::ALL {
        writeln!(text, "{:?} {:?}/{}", c.type_(), c.status(), c.reason()).unwrap();
    }
    insta::assert_snapshot!(text);
}

#[test]
fn every_pair_reads_back() {
    let now = at(1_700_000_000);
    for c in Condition::ALL {
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, c, &now));
        assert_eq!(conditions.len(), 1);
        assert_eq!(Condition::read(&conditions[0]), Some(c), "{c:?}");
        assert_eq!(status(&conditions, c.type_()), c.status());
        assert_eq!(conditions[0].message.as_deref(), Some(c.default_message()));
    }
}

#[test]
fn missing_reads_as_none() {
    for type_ in [
        PeeringConditionType::OutgoingPeering,
        PeeringConditionType::IncomingPeering,
        PeeringConditionType::NetworkStatus,
        PeeringConditionType::AuthenticationStatus,
        PeeringConditionType::ProcessForeignClusterStatus,
    ] {
        assert_eq!(status(&[], type_), PeeringConditionStatus::None);
        assert!(get(&[], type_).is_none());
        assert_eq!(
            ForeignClusterStatus::default().condition(type_),
            PeeringConditionStatus::None
        );
    }
}

#[test]
fn transition_time_moves_only_with_the_status() {
    let mut c = Vec::new();
    assert!(set(
        &mut c,
        Condition::Outgoing(Peering::ResourceRequestPending),
        &at(100)
    ));
    // Same status (Pending), other reason: reason and message follow, the time stays.
    assert!(set(
        &mut c,
        Condition::Outgoing(Peering::KubeletPending),
        &at(200)
    ));
    assert_eq!(c[0].last_transition_time, Some(at(100)));
    assert_eq!(c[0].reason.as_deref(), Some("KubeletPending"));
    // The same again: nothing changes, the caller skips the write.
    assert!(!set(
        &mut c,
        Condition::Outgoing(Peering::KubeletPending),
        &at(300)
    ));
    assert_eq!(c[0].last_transition_time, Some(at(100)));
    // A new status: the time moves.
    assert!(set(
        &mut c,
        Condition::Outgoing(Peering::Accepted),
        &at(400)
    ));
    assert_eq!(c[0].status, PeeringConditionStatus::Established);
    assert_eq!(c[0].last_transition_time, Some(at(400)));
    // Only the message differs: changed, time kept.
    assert!(set(
        &mut c,
        Condition::Outgoing(Peering::Accepted).with_message("in liqo-tenant-milan-1a2b3c"),
        &at(500)
    ));
    assert_eq!(c[0].last_transition_time, Some(at(400)));
    assert_eq!(c[0].message.as_deref(), Some("in liqo-tenant-milan-1a2b3c"));
}

#[test]
fn types_are_kept_apart_in_write_order() {
    let mut c = Vec::new();
    set(&mut c, Condition::Process(Process::Processable), &at(1));
    set(
        &mut c,
        Condition::Authentication(Authentication::Pending),
        &at(2),
    );
    set(&mut c, Condition::Outgoing(Peering::None), &at(3));
    set(&mut c, Condition::Incoming(Peering::Accepted), &at(4));
    set(
        &mut c,
        Condition::Network(Network::Error).with_message("gateway refused: peers[0].endpoint"),
        &at(5),
    );
    set(
        &mut c,
        Condition::Authentication(Authentication::Accepted),
        &at(6),
    );
    assert_eq!(c.len(), 5);
    insta::assert_json_snapshot!(c);
}

#[test]
fn a_stored_condition_without_time_gets_one() {
    let mut c = vec![PeeringCondition {
        type_: PeeringConditionType::NetworkStatus,
        status: PeeringConditionStatus::None,
        last_transition_time: None,
        reason: Some("TunnelEndpointNotFound".into()),
        message: Some(
            Condition::Network(Network::NotFound)
                .default_message()
                .into(),
        ),
    }];
    assert!(set(&mut c, Condition::Network(Network::NotFound), &at(7)));
    assert_eq!(c[0].last_transition_time, Some(at(7)));
}

#[test]
fn unknown_reasons_read_as_unknown() {
    let stored = PeeringCondition {
        type_: PeeringConditionType::OutgoingPeering,
        status: PeeringConditionStatus::Pending,
        last_transition_time: None,
        reason: Some("SomethingElse".into()),
        message: None,
    };
    assert_eq!(Condition::read(&stored), None);
    // A reason of another type does not match either.
    let stored = PeeringCondition {
        reason: Some("IdentityAccepted".into()),
        ..stored
    };
    assert_eq!(Condition::read(&stored), None);
}

use std::fmt::Write;

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use super::*;
use crate::conditions::{Authentication as A, Condition, Peering as P, set};

fn conditions(out: Option<P>, inc: Option<P>, auth: Option<A>) -> Vec<PeeringCondition> {
    let now = Time(Timestamp::UNIX_EPOCH);
    let mut c = Vec::new();
    if let Some(a) = auth {
        set(&mut c, Condition::Authentication(a), &now);
    }
    if let Some(o) = out {
        set(&mut c, Condition::Outgoing(o), &now);
    }
    if let Some(i) = inc {
        set(&mut c, Condition::Incoming(i), &now);
    }
    c
}

/// Outgoing, incoming and authentication conditions (absent: `None`), and the phase.
type Row = (Option<P>, Option<P>, Option<A>, PeeringPhase);

#[test]
fn phase_from_conditions() {
    use PeeringPhase as Ph;
    let rows: &[Row] = &[
        (None, None, None, Ph::None),
        (Some(P::None), Some(P::None), Some(A::Pending), Ph::None),
        (None, None, Some(A::Denied), Ph::None),
        (None, None, Some(A::NotReachable), Ph::None),
        (None, None, Some(A::Accepted), Ph::Authenticated),
        (
            Some(P::None),
            Some(P::None),
            Some(A::Accepted),
            Ph::Authenticated,
        ),
        (
            Some(P::ResourceRequestPending),
            None,
            Some(A::Accepted),
            Ph::Outgoing,
        ),
        (
            Some(P::KubeletPending),
            Some(P::None),
            Some(A::Accepted),
            Ph::Outgoing,
        ),
        (Some(P::Accepted), None, Some(A::Accepted), Ph::Outgoing),
        (Some(P::Deleting), None, Some(A::Accepted), Ph::Outgoing),
        // A direction counts even while authentication reads otherwise.
        (Some(P::Accepted), None, Some(A::NotReachable), Ph::Outgoing),
        (None, Some(P::ResourceRequestPending), None, Ph::Incoming),
        (
            Some(P::None),
            Some(P::Accepted),
            Some(A::Accepted),
            Ph::Incoming,
        ),
        (
            Some(P::Accepted),
            Some(P::Accepted),
            Some(A::Accepted),
            Ph::Bidirectional,
        ),
        (
            Some(P::KubeletPending),
            Some(P::Deleting),
            None,
            Ph::Bidirectional,
        ),
    ];
    for (out, inc, auth, want) in rows {
        let c = conditions(*out, *inc, *auth);
        assert_eq!(
            PeeringPhase::of(&c),
            *want,
            "outgoing {out:?} incoming {inc:?} auth {auth:?}"
        );
    }
    assert_eq!(PeeringPhase::of_status(None), PeeringPhase::None);
    let status = ForeignClusterStatus {
        peering_conditions: conditions(Some(P::Accepted), None, Some(A::Accepted)),
        ..Default::default()
    };
    assert_eq!(
        PeeringPhase::of_status(Some(&status)),
        PeeringPhase::Outgoing
    );
}

#[test]
fn roles_per_phase() {
    use PeeringPhase as Ph;
    use RoleSet::*;
    assert_eq!(roles(Ph::None), [Basic]);
    assert_eq!(roles(Ph::Authenticated), [Basic]);
    assert_eq!(roles(Ph::Outgoing), [Basic, Outgoing]);
    assert_eq!(roles(Ph::Incoming), [Basic, Incoming]);
    assert_eq!(roles(Ph::Bidirectional), [Basic, Outgoing, Incoming]);
    assert_eq!(
        RoleSet::ALL.map(RoleSet::label_value),
        ["basic", "outgoing", "incoming"]
    );
}

#[test]
fn the_network_is_wanted_with_networking_and_a_direction_or_in_band() {
    use NetworkingEnabled::{No, Yes};
    use PeeringPhase as Ph;
    assert!(!network_wanted(Ph::None, Yes, false));
    assert!(!network_wanted(Ph::Authenticated, Yes, false));
    assert!(network_wanted(Ph::Authenticated, Yes, true));
    assert!(network_wanted(Ph::Incoming, Yes, false));
    assert!(!network_wanted(Ph::Bidirectional, No, true));
    assert!(network_needed(Ph::Outgoing, false));
    assert!(network_needed(Ph::None, true));
    assert!(!network_needed(Ph::Authenticated, false));
}

#[test]
fn replicated_kinds_per_phase() {
    use NetworkingEnabled::{No, Yes};
    use PeeringPhase as Ph;
    use ReplicatedKind::*;
    assert!(replicated_kinds(Ph::None, Yes).is_empty());
    assert_eq!(replicated_kinds(Ph::Authenticated, Yes), [ResourceRequest]);
    assert_eq!(
        replicated_kinds(Ph::Outgoing, Yes),
        [ResourceRequest, NetworkConfig, NamespaceMap]
    );
    assert_eq!(
        replicated_kinds(Ph::Outgoing, No),
        [ResourceRequest, NamespaceMap]
    );
    assert_eq!(
        replicated_kinds(Ph::Incoming, Yes),
        [ResourceRequest, ResourceOffer, NetworkConfig]
    );
    assert_eq!(
        replicated_kinds(Ph::Bidirectional, No),
        [ResourceRequest, ResourceOffer, NamespaceMap]
    );
    assert_eq!(
        replicated_kinds(Ph::Bidirectional, Yes),
        ReplicatedKind::ALL
    );
}

#[test]
fn api_resources_name_the_kinds() {
    let rr = ReplicatedKind::ResourceRequest.api_resource();
    assert_eq!(
        (
            rr.group.as_str(),
            rr.version.as_str(),
            rr.kind.as_str(),
            rr.plural.as_str()
        ),
        (
            "discovery.liqo.io",
            "v1alpha1",
            "ResourceRequest",
            "resourcerequests"
        )
    );
    let nm = ReplicatedKind::NamespaceMap.api_resource();
    assert_eq!(nm.api_version, "virtualkubelet.liqo.io/v1alpha1");
    assert_eq!(
        ReplicatedKind::ResourceOffer.api_resource().plural,
        "resourceoffers"
    );
    assert_eq!(
        ReplicatedKind::NetworkConfig.api_resource().group,
        "net.liqo.io"
    );
}

/// The whole table at a glance: phase × networking → bound roles and replicated kinds.
#[test]
fn table() {
    let mut text = String::new();
    for phase in PeeringPhase::ALL {
        for networking in [NetworkingEnabled::Yes, NetworkingEnabled::No] {
            writeln!(
                text,
                "{phase:<13} networking={:<3} roles={:?} replicates={:?}",
                format!("{networking:?}"),
                roles(phase),
                replicated_kinds(phase, networking)
            )
            .unwrap();
        }
    }
    insta::assert_snapshot!(text);
}

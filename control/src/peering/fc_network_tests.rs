//! NETWORKING from the TunnelEndpoint and the gateway operator's Lease.

use std::time::Duration;

use super::{tests::base, *};
use crate::api::discovery::PeeringConditionStatus as S;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A Lease renewed at `renewed`, valid for `secs`, seen renewed at that time on our clock
/// (no skew; at 00:00:00 if never renewed).
fn lease(renewed: Option<&str>, secs: Option<i32>) -> GatewayLease {
    seen(renewed, secs, renewed.unwrap_or("2026-01-01T00:00:00Z"))
}

/// A Lease stamped `renewed` by its holder's clock, last seen renewed at `observed` (ours).
fn seen(renewed: Option<&str>, secs: Option<i32>, observed: &str) -> GatewayLease {
    GatewayLease {
        name: "liqo/liqo-gateway".into(),
        held: Ok(Some(LeaseTimes {
            renewed: renewed.map(at),
            duration_secs: secs,
            observed: at(observed),
        })),
    }
}

fn fresh() -> TunnelState {
    TunnelState::Connected(lease(Some("2026-01-01T00:00:00Z"), Some(40)))
}

/// The NETWORKING decision and the recheck for `tunnel` at `now` (through `decide`).
fn read_at(t: Option<TunnelState>, now: &str) -> (NewCondition, Option<Duration>) {
    let o = Observed {
        tunnel: t,
        now: at(now),
        ..base()
    };
    let actions = decide(&o);
    let c = actions
        .iter()
        .find_map(|a| match a {
            Action::SetNetwork(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let recheck = actions.iter().find_map(|a| match a {
        Action::RecheckAfter(d) => Some(*d),
        _ => None,
    });
    (c, recheck)
}

fn read(t: Option<TunnelState>) -> NewCondition {
    read_at(t, "2026-01-01T00:00:10Z").0
}

#[test]
fn networking_follows_the_tunnel_endpoint() {
    let c = read(None);
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::None, "TunnelEndpointNotFound")
    );
    let c = read(Some(TunnelState::Connecting));
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::Pending, "TunnelEndpointConnecting")
    );
    let c = read(Some(fresh()));
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::Established, "TunnelEndpointAvailable")
    );
    let c = read(Some(TunnelState::Error(
        "handshake refused: bad key".into(),
    )));
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::None, "TunnelEndpointError")
    );
    assert_eq!(c.message, "handshake refused: bad key");
    let c = read(Some(TunnelState::Error(String::new())));
    assert_eq!(
        c.message,
        Condition::Network(Network::Error).default_message()
    );
    // Being deleted: never Established, whatever its last status.
    let c = read(Some(TunnelState::Deleting));
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::Pending, "TunnelEndpointConnecting")
    );
    assert_eq!(c.message, crate::peering::fc::TUNNEL_DELETING);
}

#[test]
fn connected_is_established_only_while_the_gateway_lease_is_fresh() {
    // Renewed at 00:00:00 for 40 s: fresh at 10 s, rechecked just after it expires.
    let (c, recheck) = read_at(Some(fresh()), "2026-01-01T00:00:10Z");
    assert_eq!(c.condition.status(), S::Established);
    let recheck = recheck.expect("a recheck at the expiry");
    assert!(
        recheck > Duration::from_secs(30) && recheck <= Duration::from_secs(31),
        "{recheck:?}"
    );
    // At the expiry itself: still fresh (expired only once past).
    let (c, _) = read_at(Some(fresh()), "2026-01-01T00:00:40Z");
    assert_eq!(c.condition.status(), S::Established);
    // Past it: Pending, naming the Lease and how long since it was renewed; no recheck
    // (a renewal is an event of the Lease).
    let (c, recheck) = read_at(Some(fresh()), "2026-01-01T00:01:13Z");
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::Pending, "TunnelEndpointConnecting")
    );
    assert!(c.message.contains("liqo/liqo-gateway"), "{}", c.message);
    assert!(
        c.message.contains("last renewed at 2026-01-01T00:00:00Z"),
        "{}",
        c.message
    );
    assert!(c.message.contains("valid for 40s"), "{}", c.message);
    assert_eq!(recheck, None);
    // Later, still expired: the same message (no status rewrite per resync).
    let (later, _) = read_at(Some(fresh()), "2026-01-01T00:05:00Z");
    assert_eq!(later.message, c.message);
    // No Lease: no gateway operator runs.
    let none = TunnelState::Connected(GatewayLease {
        name: "liqo/liqo-gateway".into(),
        held: Ok(None),
    });
    let (c, recheck) = read_at(Some(none), "2026-01-01T00:00:10Z");
    assert_eq!(c.condition.status(), S::Pending);
    assert!(
        c.message.contains("no Lease liqo/liqo-gateway"),
        "{}",
        c.message
    );
    assert_eq!(recheck, None);
    // A Lease never renewed, or with no (or a zero) duration, is not fresh.
    for (l, says) in [
        (lease(None, Some(40)), "never renewed"),
        (
            lease(Some("2026-01-01T00:00:00Z"), None),
            "no leaseDurationSeconds",
        ),
        (
            lease(Some("2026-01-01T00:00:00Z"), Some(0)),
            "no leaseDurationSeconds",
        ),
    ] {
        let (c, _) = read_at(Some(TunnelState::Connected(l)), "2026-01-01T00:00:10Z");
        assert_eq!(c.condition.status(), S::Pending);
        assert!(c.message.contains(says), "{}", c.message);
    }
    // A Lease that cannot be read (e.g. Forbidden): Pending, saying why; read again soon.
    let unreadable = TunnelState::Connected(GatewayLease {
        name: "liqo/liqo-gateway".into(),
        held: Err("leases.coordination.k8s.io is forbidden".into()),
    });
    let (c, recheck) = read_at(Some(unreadable), "2026-01-01T00:00:10Z");
    assert_eq!(
        (c.condition.status(), c.message.as_str()),
        (
            S::Pending,
            "cannot read Lease liqo/liqo-gateway: leases.coordination.k8s.io is forbidden"
        )
    );
    assert_eq!(recheck, Some(Duration::from_secs(2)));
    // Only NETWORKING is rechecked: the other states ask for nothing.
    for t in [
        None,
        Some(TunnelState::Connecting),
        Some(TunnelState::Deleting),
    ] {
        assert_eq!(read_at(t, "2026-01-01T00:00:10Z").1, None);
    }
}

#[test]
fn lease_freshness_is_judged_on_our_clock_whatever_the_holders_clock_says() {
    // The holder's clock far behind or far ahead of ours: seen renewing 10 s ago (our clock),
    // Established, rechecked at the expiry of OUR observation.
    for stamped in ["2020-01-01T00:00:00Z", "2031-06-01T00:00:00Z"] {
        let l = seen(Some(stamped), Some(40), "2026-01-01T00:00:00Z");
        let (c, recheck) = read_at(Some(TunnelState::Connected(l)), "2026-01-01T00:00:10Z");
        assert_eq!(c.condition.status(), S::Established, "{stamped}");
        let recheck = recheck.expect("a recheck at the expiry");
        assert!(
            recheck > Duration::from_secs(30) && recheck <= Duration::from_secs(31),
            "{stamped}: {recheck:?}"
        );
        // Not seen renewed for longer than its duration: Pending, whatever its renewTime
        // says, naming the renewTime (stable while it stays so).
        let l = seen(Some(stamped), Some(40), "2026-01-01T00:00:00Z");
        let (c, recheck) = read_at(Some(TunnelState::Connected(l)), "2026-01-01T00:00:41Z");
        assert_eq!(c.condition.status(), S::Pending, "{stamped}");
        assert!(
            c.message.contains(&format!("last renewed at {stamped}")),
            "{}",
            c.message
        );
        assert_eq!(recheck, None);
    }
}

#[test]
fn a_refusal_of_our_network_config_is_what_networking_says_while_there_is_no_tunnel() {
    let refused = OwnRefused {
        peer: "milan".into(),
        why: "spec.podCIDR: 10.0.0.0/33 is not a CIDR".into(),
    };
    let with = |tunnel: Option<TunnelState>| {
        let o = Observed {
            tunnel,
            own_refused: Some(refused.clone()),
            ..base()
        };
        decide(&o)
            .into_iter()
            .find_map(|a| match a {
                Action::SetNetwork(c) => Some(c),
                _ => None,
            })
            .unwrap()
    };
    let says = "milan refused our NetworkConfig: spec.podCIDR: 10.0.0.0/33 is not a CIDR";
    let c = with(None);
    assert_eq!(
        (
            c.condition.status(),
            c.condition.reason(),
            c.message.as_str()
        ),
        (S::None, "TunnelEndpointNotFound", says)
    );
    let c = with(Some(TunnelState::Connecting));
    assert_eq!(
        (
            c.condition.status(),
            c.condition.reason(),
            c.message.as_str()
        ),
        (S::Pending, "TunnelEndpointConnecting", says)
    );
    // A tunnel in error or being deleted says its own.
    let c = with(Some(TunnelState::Error("handshake".into())));
    assert_eq!(c.message, "handshake");
    let c = with(Some(TunnelState::Deleting));
    assert_eq!(c.message, crate::peering::fc::TUNNEL_DELETING);
    // No refusal: the condition's own message.
    assert_eq!(
        read(None).message,
        "No TunnelEndpoint for the remote cluster"
    );
}

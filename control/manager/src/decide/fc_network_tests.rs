//! NETWORKING from the TunnelEndpoint.

use super::{tests::base, *};

#[test]
fn networking_follows_the_tunnel_endpoint() {
    use control::api::discovery::PeeringConditionStatus as S;
    let read = |t: Option<TunnelState>| {
        let o = Observed {
            tunnel: t,
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
    let c = read(Some(TunnelState::Connected));
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
    ); // Being deleted: never Established, whatever its last status.
    let c = read(Some(TunnelState::Deleting));
    assert_eq!(
        (c.condition.status(), c.condition.reason()),
        (S::Pending, "TunnelEndpointConnecting")
    );
    assert_eq!(c.message, crate::decide::fc::TUNNEL_DELETING);
}

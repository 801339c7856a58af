//! The teardown decisions: unpeering, a peer gone forever (the grace), a duplicate
//! ForeignCluster, the peer's copy.

use serde_json::json;

use super::{tests::*, *};

pub(super) fn established() -> Observed {
    Observed {
        own: Some(own(Some(processed()))),
        copy: Some(copy(Some(processed()))),
        ipam: Some(held(Some(r("10.71.0.0/16", "10.72.0.0/16")))),
        tunnel: Some(Tunnel {
            spec: json!({}),
            deleting_since: None,
        }),
        ..base()
    }
}

#[test]
fn unpeering_deletes_waits_then_releases_and_drops_the_finalizer() {
    let o = Observed {
        phase: PeeringPhase::Authenticated,
        ..established()
    };
    assert_eq!(
        decide(&o),
        [Action::DeleteOwn, Action::DeleteTunnel, Action::DeleteCopy]
    );
    // Deleting: wait within the grace.
    let since = Some("2026-11-23T07:58:00Z".parse().unwrap());
    let o = Observed {
        own: Some(Own {
            deleting_since: since,
            ..own(None)
        }),
        tunnel: Some(Tunnel {
            spec: json!({}),
            deleting_since: since,
        }),
        copy: None,
        ..o
    };
    assert!(decide(&o).is_empty());
    // Both gone: release, then the finalizer.
    let o = Observed {
        own: None,
        tunnel: None,
        ..o
    };
    assert_eq!(
        decide(&o),
        [Action::Release { forced: None }, Action::RemoveFinalizer]
    );
    let o = Observed { ipam: None, ..o };
    assert_eq!(decide(&o), [Action::RemoveFinalizer]);
    let o = Observed {
        has_finalizer: false,
        ..o
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn a_peer_gone_forever_is_released_after_the_grace_with_the_reason() {
    let since = Some("2026-11-23T07:54:59Z".parse().unwrap());
    let o = Observed {
        fc_deleting: true,
        own: Some(Own {
            deleting_since: since,
            ..own(None)
        }),
        tunnel: None,
        copy: None,
        ..established()
    };
    let a = decide(&o);
    let [
        Action::Release { forced: Some(why) },
        Action::RemoveFinalizer,
    ] = &a[..]
    else {
        panic!("{a:?}")
    };
    assert_eq!(
        why,
        "released the IPAM ranges after the 300 s grace with our NetworkConfig (the peer did not remove its copy) still present"
    );
    // A deletion from the future (clock skew) is never overdue.
    let o = Observed {
        own: Some(Own {
            deleting_since: Some("2026-11-23T09:00:00Z".parse().unwrap()),
            ..own(None)
        }),
        ..o
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn a_duplicate_foreign_cluster_never_touches_the_peers_network() {
    // The IPAM holds the peer for the ForeignCluster that owns it: a younger duplicate (no
    // tenant namespace of its own) must not release it.
    let o = Observed {
        processable: false,
        tenant_known: false,
        has_finalizer: false,
        ..established()
    };
    assert!(decide(&o).is_empty());
    let o = Observed {
        has_finalizer: true,
        ..o
    };
    assert_eq!(decide(&o), [Action::RemoveFinalizer]);
}

#[test]
fn the_peers_copy_goes_with_the_peering_only_and_once() {
    // Ours No, the peer's Yes: our network goes, the peer's copy stays (deleting it would
    // only have the peer's replicator make it again).
    let o = Observed {
        networking: NetworkingEnabled::No,
        ..established()
    };
    assert!(!wanted(&o));
    assert_eq!(decide(&o), [Action::DeleteOwn, Action::DeleteTunnel]);
    // No direction left, or the ForeignCluster deleted: it goes, once.
    for o in [
        Observed {
            phase: PeeringPhase::Authenticated,
            ..o.clone()
        },
        Observed {
            fc_deleting: true,
            ..o.clone()
        },
    ] {
        assert!(decide(&o).contains(&Action::DeleteCopy), "{o:?}");
        let mut c = o.copy.clone().unwrap();
        c.deleting = true;
        let again = decide(&Observed {
            copy: Some(c),
            ..o.clone()
        });
        assert!(!again.contains(&Action::DeleteCopy), "{again:?}");
    }
}

#[test]
fn in_band_the_tunnel_outlasts_our_network_config_within_the_grace() {
    // The peer's API server is reached through the tunnel: our NetworkConfig goes first (the
    // replicator removes its copy over the tunnel), then the tunnel.
    let o = Observed {
        in_band: true,
        fc_deleting: true,
        ..established()
    };
    assert_eq!(decide(&o), [Action::DeleteOwn, Action::DeleteCopy]);
    let since = Some("2026-11-23T07:58:00Z".parse().unwrap());
    let deleting = Observed {
        own: Some(Own {
            deleting_since: since,
            ..own(None)
        }),
        copy: None,
        ..o
    };
    assert!(decide(&deleting).is_empty());
    // Our NetworkConfig gone: the tunnel goes.
    let gone = Observed {
        own: None,
        ..deleting.clone()
    };
    assert_eq!(decide(&gone), [Action::DeleteTunnel]);
    // Past the grace, the tunnel goes even though our NetworkConfig is still there.
    let overdue = Observed {
        own: Some(Own {
            deleting_since: Some("2026-11-23T07:54:59Z".parse().unwrap()),
            ..own(None)
        }),
        ..deleting
    };
    assert_eq!(decide(&overdue), [Action::DeleteTunnel]);
    // Out-of-band, both go at once (as in `unpeering_deletes_...`).
    let out_of_band = Observed {
        in_band: false,
        ..overdue
    };
    assert_eq!(
        decide(&Observed {
            own: Some(own(None)),
            ..out_of_band
        }),
        [Action::DeleteOwn, Action::DeleteTunnel]
    );
}

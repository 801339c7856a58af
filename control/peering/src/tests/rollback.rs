//! The rollback of `peer` and `unpeer` with a failure injected at every step, before it takes
//! effect and after; the release that `unpeer` runs last; a peer's view that must be forgotten.

use crate::{
    Error, Refusal, Step,
    fakes::{FakeSide, When, snapshot},
    peer, unpeer,
};

use super::{anyhow_like, id, world};

/// Every point a `peer` may fail at, on either side.
const PEER_POINTS: &[&str] = &[
    "external_cidr",
    "ipam_peer",
    "remap",
    "set_peer_view",
    "public_key",
    "nodes",
    "gateway_node",
    "write_gateway",
    "handshake",
    "write_overlay",
    "apply_overlay",
    "save",
];

#[tokio::test]
async fn a_failed_peer_puts_both_sides_back_whatever_step_failed() {
    for (when, point, fail_rome) in cases(PEER_POINTS) {
        {
            let [(mut rome, fr), (mut milan, fm), (mut turin, _)] = world();
            // Both have a peering already, which must survive untouched.
            peer(&mut rome, &mut turin).await.unwrap();
            peer(&mut milan, &mut turin).await.unwrap();
            let before = (snapshot(&rome), snapshot(&milan));
            if fail_rome { &fr } else { &fm }.set_when(when, point, 1);
            let e = peer(&mut rome, &mut milan).await.unwrap_err();
            let Error::Failed {
                cluster, rollback, ..
            } = &e
            else {
                panic!("{point} {when:?}: {e}");
            };
            assert_eq!(
                cluster.as_str(),
                if fail_rome { "rome" } else { "milan" },
                "{point} {when:?}: {e}"
            );
            assert!(rollback.is_empty(), "{point} {when:?}: {e}");
            assert!(e.to_string().contains("everything was put back"), "{e}");
            assert_eq!(
                (snapshot(&rome), snapshot(&milan)),
                before,
                "{point} {when:?} on {cluster}"
            );
            // And it works once the fault is gone.
            peer(&mut rome, &mut milan).await.unwrap();
        }
    }
}

#[tokio::test]
async fn the_error_names_the_step_and_a_failed_rollback() {
    let [(mut rome, _), (mut milan, fm), _] = world();
    fm.set("handshake", 1);
    let e = peer(&mut rome, &mut milan).await.unwrap_err();
    assert!(
        e.to_string().starts_with(
            "peering rome with milan: waiting for the gateway to handshake with rome on milan"
        ),
        "{e}"
    );
    // The gateway cannot even be put back: said so, with the step and the cause.
    fm.set("write_gateway", 2);
    let e = peer(&mut rome, &mut milan).await.unwrap_err();
    let Error::Failed { step, rollback, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(*step, Step::WriteGateway);
    assert_eq!(rollback.len(), 1, "{e}");
    assert_eq!(rollback[0].step, Step::WriteGateway);
    assert!(
        e.to_string()
            .contains("putting things back failed too: writing the gateway's peers on milan: injected failure at write_gateway"),
        "{e}"
    );
    // Everything else was put back.
    assert!(rome.gateway.peers.is_empty() && rome.records.peerings.is_empty());
    assert!(milan.ipam.inner.peers().next().is_none());
}

/// The steps of `unpeer` before the release (which comes last and is not rolled back).
const UNPEER_POINTS: &[&str] = &[
    "nodes",
    "gateway_node",
    "write_gateway",
    "gone",
    "write_overlay",
    "apply_overlay",
    "save",
];

/// Every point, failing before or after it takes effect, on rome or on milan.
fn cases(points: &'static [&'static str]) -> impl Iterator<Item = (When, &'static str, bool)> {
    [When::Before, When::After].into_iter().flat_map(move |w| {
        points
            .iter()
            .flat_map(move |p| [true, false].map(|rome| (w, *p, rome)))
    })
}

#[tokio::test]
async fn a_failed_unpeer_puts_both_sides_back_whatever_step_failed() {
    for (when, point, fail_rome) in cases(UNPEER_POINTS) {
        {
            let [(mut rome, fr), (mut milan, fm), (mut turin, _)] = world();
            peer(&mut rome, &mut turin).await.unwrap();
            peer(&mut rome, &mut milan).await.unwrap();
            let before = (snapshot(&rome), snapshot(&milan));
            let changes = (rome.ipam.changes.len(), milan.ipam.changes.len());
            if fail_rome { &fr } else { &fm }.set_when(when, point, 1);
            let e = unpeer(&mut rome, &mut milan).await.unwrap_err();
            let Error::Failed { rollback, .. } = &e else {
                panic!("{point} {when:?}: {e}");
            };
            assert!(rollback.is_empty(), "{point} {when:?}: {e}");
            assert_eq!(
                (snapshot(&rome), snapshot(&milan)),
                before,
                "{point} {when:?}"
            );
            // The IPAMs release last: a rolled-back unpeering never touched them (ranges
            // released and acquired again could come back elsewhere).
            assert_eq!(
                (rome.ipam.changes.len(), milan.ipam.changes.len()),
                changes,
                "{point} {when:?}: {:?} {:?}",
                rome.ipam.changes,
                milan.ipam.changes
            );
            unpeer(&mut rome, &mut milan).await.unwrap();
            assert!(rome.records.peerings.contains_key(&id("turin")));
            assert_eq!(rome.gateway.peers.len(), 1);
            assert!(milan.gateway.peers.is_empty());
            assert!(milan.ipam.inner.peers().next().is_none());
            assert_eq!(milan.overlay.applied.as_ref().unwrap().remote_cidrs, []);
        }
    }
}

#[tokio::test]
async fn a_failed_release_is_reported_and_unpeering_again_releases() {
    for (when, point, fail_rome) in cases(&["ipam_peer", "release"]) {
        let [(mut rome, fr), (mut milan, fm), _] = world();
        peer(&mut rome, &mut milan).await.unwrap();
        if fail_rome { &fr } else { &fm }.set_when(when, point, 1);
        let e = unpeer(&mut rome, &mut milan).await.unwrap_err();
        let (me, other) = if fail_rome {
            ("rome", "milan")
        } else {
            ("milan", "rome")
        };
        let Error::StillHeld {
            cluster,
            peer: held,
            also,
            ..
        } = &e
        else {
            panic!("{point} {when:?}: {e}");
        };
        assert_eq!((cluster.as_str(), held.as_str()), (me, other), "{e}");
        assert_eq!(*also, None, "{e}");
        let text = anyhow_like(&e);
        assert!(
            text.starts_with(&format!(
                "unpeering rome and milan: unpeered, but {me} could not release {other}'s ranges, \
                 which stay held until unpeering again releases them"
            )) && text.contains(&format!("injected failure at {point}")),
            "{text}"
        );
        // Unpeered: records, gateways and overlays no longer know the peer.
        for s in [&rome, &milan] {
            assert!(s.records.peerings.is_empty() && s.gateway.peers.is_empty());
            assert_eq!(s.overlay.applied.as_ref().unwrap().remote_cidrs, []);
        }
        let (failing, fine) = if fail_rome {
            (&rome, &milan)
        } else {
            (&milan, &rome)
        };
        assert!(fine.ipam.inner.peers().next().is_none());
        // Held unless the release took effect and only its answer was lost.
        let still = failing.ipam.inner.peers().next().is_some();
        assert_eq!(still, !(when == When::After && point == "release"), "{e}");
        if still {
            unpeer(&mut rome, &mut milan).await.unwrap();
        }
        assert!(rome.ipam.inner.peers().next().is_none());
        assert!(milan.ipam.inner.peers().next().is_none());
        // Now nothing is held: unpeering again is refused, and peering works.
        let e = unpeer(&mut rome, &mut milan).await.unwrap_err();
        assert!(
            matches!(e.refusal(), Some(Refusal::NotPeered { .. })),
            "{e}"
        );
        peer(&mut rome, &mut milan).await.unwrap();
    }
}

#[tokio::test]
async fn both_failed_releases_are_reported() {
    let [(mut rome, fr), (mut milan, fm), _] = world();
    peer(&mut rome, &mut milan).await.unwrap();
    fr.set("release", 1);
    fm.set("release", 1);
    let e = unpeer(&mut rome, &mut milan).await.unwrap_err();
    let Error::StillHeld { cluster, also, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(cluster.as_str(), "rome");
    let also = also.as_ref().unwrap();
    assert_eq!(
        (also.cluster.as_str(), &also.step),
        ("milan", &Step::Release(id("rome")))
    );
    assert!(
        e.to_string().contains(
            "(nor could the other side: releasing rome's ranges in the IPAM on milan: \
             injected failure at release)"
        ),
        "{e}"
    );
    unpeer(&mut rome, &mut milan).await.unwrap();
    assert!(rome.ipam.inner.peers().next().is_none());
    assert!(milan.ipam.inner.peers().next().is_none());
}

/// rome holds milan's ranges without milan's view of it (an exchange that stopped after
/// step 1 and could not be put back).
fn held_without_view(rome: &mut FakeSide) {
    rome.ipam
        .inner
        .acquire(
            &id("milan"),
            "10.200.0.0/16".parse().unwrap(),
            "10.70.0.0/16".parse().unwrap(),
        )
        .unwrap();
}

#[tokio::test]
async fn a_view_recorded_in_a_failed_peering_is_forgotten() {
    for point in ["handshake", "save"] {
        let [(mut rome, _), (mut milan, fm), (mut turin, _)] = world();
        peer(&mut rome, &mut turin).await.unwrap();
        peer(&mut milan, &mut turin).await.unwrap();
        held_without_view(&mut rome);
        let before = (snapshot(&rome), snapshot(&milan));
        fm.set(point, 1);
        let e = peer(&mut rome, &mut milan).await.unwrap_err();
        assert!(e.to_string().contains("everything was put back"), "{e}");
        assert_eq!((snapshot(&rome), snapshot(&milan)), before, "{point}");
        assert_eq!(
            rome.ipam.inner.peer(&id("milan")).unwrap().our_pod_view,
            None
        );
    }
}

#[tokio::test]
async fn a_view_the_ipam_cannot_forget_is_a_rollback_failure() {
    let [(mut rome, _), (mut milan, fm), _] = world();
    held_without_view(&mut rome);
    // An IPAM without a call to forget a view.
    rome.ipam.can_clear = false;
    fm.set("handshake", 1);
    let e = peer(&mut rome, &mut milan).await.unwrap_err();
    let Error::Failed { rollback, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(rollback.len(), 1, "{e}");
    assert_eq!(
        (&rollback[0].step, rollback[0].cluster.as_str()),
        (&Step::ClearPeerView(id("milan")), "rome")
    );
    assert!(
        e.to_string().contains(
            "forgetting in the IPAM how milan sees us on rome: this IPAM cannot forget how \
             milan sees us"
        ),
        "{e}"
    );
    // The rest was put back: milan holds nothing, rome still holds milan's ranges.
    assert!(milan.ipam.inner.peers().next().is_none());
    assert!(rome.records.peerings.is_empty() && rome.gateway.peers.is_empty());
}

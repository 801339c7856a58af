//! The orchestration against the in-memory IPAM and fake sinks: the exchange, idempotence,
//! the refusals, and the rollback of a failure injected at every step, before it takes effect
//! and after.

use liqo_types::{Cidr, ClusterId};

use crate::{
    Error, Refusal, Step,
    fakes::{FakeSide, Faults, When, side, snapshot},
    ipam::{self, Ranges},
    move_gateway, peer, unpeer,
};

fn ep(last: u8) -> Option<std::net::SocketAddr> {
    Some(format!("198.18.0.{last}:51840").parse().unwrap())
}

fn id(s: &str) -> ClusterId {
    s.parse().unwrap()
}

fn c(s: &str) -> Cidr {
    s.parse().unwrap()
}

/// rome (reserving 10.201.0.0/16), milan and turin, all with pod CIDR 10.200.0.0/16.
fn world() -> [(FakeSide, Faults); 3] {
    [
        side("rome", 1, ep(1), &["10.201.0.0/16"]),
        side("milan", 2, ep(2), &[]),
        side("turin", 3, ep(3), &[]),
    ]
}

#[tokio::test]
async fn the_exchange_remaps_identical_pod_cidrs_and_the_views_mirror() {
    let [(mut rome, _), (mut milan, _), _] = world();
    let (va, vb) = peer(&mut rome, &mut milan).await.unwrap();
    assert_eq!(vb, va.mirrored());
    // Neither side maps the other onto one of its own ranges (rome also reserves 10.201/16).
    let own = |reserved: bool, ext: Cidr| {
        let mut v = vec![c("10.200.0.0/16"), c("10.96.0.0/12"), ext];
        v.extend(reserved.then(|| c("10.201.0.0/16")));
        v
    };
    for (v, local) in [
        (&va, own(true, c("10.70.0.0/16"))),
        (&vb, own(false, c("10.70.0.0/16"))),
    ] {
        for r in v.remote_ranges() {
            assert_eq!(r.prefix_len(), 16, "{v:?}");
            assert!(
                local.iter().all(|l| !l.overlaps(&r)),
                "{r} overlaps a local or reserved range: {v:?}"
            );
        }
    }
    assert_ne!(va.remote_pods, va.remote_external);
    // Each IPAM recorded both decisions.
    let held = rome.ipam.inner.peer(&id("milan")).unwrap();
    assert_eq!(held.pod_view, va.remote_pods.net());
    assert_eq!(held.our_pod_view, Some(va.local_pods_at_peer.net()));
    // Gateways, overlays and records follow.
    assert_eq!(rome.gateway.peers.len(), 1);
    assert_eq!(rome.gateway.peers[0].remote_pod_cidr, va.remote_pods);
    assert_eq!(rome.gateway.peers[0].endpoint, ep(2));
    assert_eq!(milan.gateway.peers[0].public_key.0, [1; 32]);
    assert_eq!(rome.overlay.applied.as_ref().unwrap().remote_cidrs, {
        let mut r = va.remote_ranges().to_vec();
        r.sort();
        r
    });
    assert_eq!(rome.records.peerings[&id("milan")].view, va);
    assert_eq!(milan.records.peerings[&id("rome")].view, vb);
}

#[tokio::test]
async fn single_side_steps_give_the_same_views() {
    let mut a = ::ipam::Ipam::new(::ipam::Config::new(
        "10.200.0.0/16".parse().unwrap(),
        "10.96.0.0/12".parse().unwrap(),
    ))
    .unwrap();
    let mut b = a.clone();
    let ann_a = ipam::announce(&mut a, c("10.200.0.0/16")).await.unwrap();
    let ann_b = ipam::announce(&mut b, c("10.200.0.0/16")).await.unwrap();
    let da = ipam::decide(&mut a, &id("milan"), ann_b).await.unwrap();
    let db = ipam::decide(&mut b, &id("rome"), ann_a).await.unwrap();
    let va = ipam::record(&mut a, &id("milan"), da, db).await.unwrap();
    let vb = ipam::record(&mut b, &id("rome"), db, da).await.unwrap();
    assert_eq!(vb, va.mirrored());
    assert_ne!(va.remote_pods, c("10.200.0.0/16"), "remapped");
    // Deciding again returns the same ranges; what is held has both decisions.
    let held = crate::ipam::Ipam::peer(&mut a, &id("milan")).await.unwrap();
    let again = ipam::decide(&mut a, &id("milan"), ann_b).await.unwrap();
    assert_eq!(again, da);
    assert_eq!(held.unwrap().seen_there, Some(db));
    // Restoring what is held changes nothing; restoring "no view yet" forgets the view.
    ipam::restore(&mut a, &id("milan"), held).await.unwrap();
    let no_view = held.map(|h| ipam::IpamPeer {
        seen_there: None,
        ..h
    });
    ipam::restore(&mut a, &id("milan"), no_view).await.unwrap();
    let p = a.peer(&id("milan")).unwrap();
    assert_eq!((p.pod_view, p.our_pod_view), (da.pods.net(), None));
    // Restoring what was held after a release acquires the same ranges again, view included.
    a.release(&id("milan")).unwrap();
    ipam::restore(&mut a, &id("milan"), held).await.unwrap();
    assert_eq!(
        crate::ipam::Ipam::peer(&mut a, &id("milan")).await.unwrap(),
        held
    );
    // Restoring to "nothing held" releases.
    ipam::restore(&mut a, &id("milan"), None).await.unwrap();
    assert!(a.peers().next().is_none());
    let r = Ranges {
        pods: c("10.71.0.0/16"),
        external: c("10.72.0.0/16"),
    };
    assert_eq!(ipam::view(r, r).remote_pods, c("10.71.0.0/16"));
}

#[tokio::test]
async fn peering_again_changes_nothing() {
    let [(mut rome, _), (mut milan, _), _] = world();
    let first = peer(&mut rome, &mut milan).await.unwrap();
    let (sa, sb) = (snapshot(&rome), snapshot(&milan));
    let second = peer(&mut rome, &mut milan).await.unwrap();
    assert_eq!(first, second);
    assert_eq!((snapshot(&rome), snapshot(&milan)), (sa, sb));
}

#[tokio::test]
async fn refusals_change_nothing() {
    let [(mut rome, _), (mut milan, _), _] = world();
    let (mut rome2, _) = side("rome", 9, ep(9), &[]);
    let e = peer(&mut rome, &mut rome2).await.unwrap_err();
    assert!(matches!(e.refusal(), Some(Refusal::SelfPeering(_))), "{e}");
    let (mut home, _) = side("home", 4, None, &[]);
    let (mut office, _) = side("office", 5, None, &[]);
    let e = peer(&mut home, &mut office).await.unwrap_err();
    assert!(
        matches!(e.refusal(), Some(Refusal::BothBehindNat { .. })),
        "{e}"
    );
    assert!(home.ipam.inner.peers().next().is_none());
    // Behind NAT with a reachable peer is fine; the NATed side has no endpoint at the peer.
    peer(&mut home, &mut rome).await.unwrap();
    assert_eq!(rome.gateway.peers[0].endpoint, None);
    assert_eq!(home.gateway.peers[0].endpoint, ep(1));

    // Unpeering checks both sides before anything changes.
    let e = unpeer(&mut rome, &mut milan).await.unwrap_err();
    assert_eq!(e.to_string(), "unpeering rome and milan");
    let unpeered = (snapshot(&rome), snapshot(&milan));
    // A one-sided record (milan forgot rome) is refused too, naming the side.
    peer(&mut rome, &mut milan).await.unwrap();
    milan.records.peerings.clear();
    let (sr2, sm2) = (snapshot(&rome), snapshot(&milan));
    let e = unpeer(&mut rome, &mut milan).await.unwrap_err();
    assert_eq!(
        e.refusal(),
        Some(&Refusal::NotPeered {
            cluster: id("milan"),
            peer: id("rome")
        })
    );
    assert_ne!((&sr2, &sm2), (&unpeered.0, &unpeered.1));
    assert_eq!((snapshot(&rome), snapshot(&milan)), (sr2, sm2));
}

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
async fn the_gateway_moves_and_a_failed_move_goes_back() {
    let [(mut rome, fr), (mut milan, _), _] = world();
    peer(&mut rome, &mut milan).await.unwrap();
    let m = move_gateway(&mut rome, "n1").await.unwrap();
    assert_eq!((m.from.as_str(), m.to.as_str()), ("n0", "n1"));
    assert!(m.ready >= m.stopped);
    assert_eq!(*rome.gateway.node.lock().unwrap(), "n1");
    assert_eq!(rome.overlay.applied.as_ref().unwrap().gateway_node, "n1");

    let e = move_gateway(&mut rome, "n1").await.unwrap_err();
    assert!(
        matches!(e.refusal(), Some(Refusal::AlreadyThere { .. })),
        "{e}"
    );
    let e = anyhow_like(&e);
    assert!(e.contains("already runs on n1"), "{e}");
    let e = move_gateway(&mut rome, "n7").await.unwrap_err();
    let e = anyhow_like(&e);
    assert!(e.contains("rome/n7") && e.contains("n0, n1, n2"), "{e}");

    for point in ["write_overlay", "start", "handshake", "apply_overlay"] {
        let before = snapshot(&rome);
        fr.set(point, 1);
        let e = move_gateway(&mut rome, "n2").await.unwrap_err();
        let Error::Failed { rollback, .. } = &e else {
            panic!("{point}: {e}")
        };
        assert!(rollback.is_empty(), "{point}: {e}");
        assert_eq!(snapshot(&rome), before, "{point}");
    }
}

#[tokio::test]
async fn a_failed_restart_after_a_failed_stop_is_reported() {
    let [(mut rome, fr), _, _] = world();
    fr.set("stop", 1);
    fr.set("start", 1);
    let e = move_gateway(&mut rome, "n1").await.unwrap_err();
    let Error::Failed { step, rollback, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(*step, Step::StopGateway);
    assert_eq!(rollback.len(), 1, "{e}");
    assert_eq!(rollback[0].step, Step::StartGateway("n0".into()));
    assert!(
        e.to_string()
            .contains("starting the gateway on n0 on rome: injected failure at start"),
        "{e}"
    );
    // With a restart that works, it runs where it was.
    fr.set("stop", 1);
    let e = move_gateway(&mut rome, "n1").await.unwrap_err();
    assert!(e.to_string().contains("everything was put back"), "{e}");
    assert!(rome.gateway.running);
    assert_eq!(*rome.gateway.node.lock().unwrap(), "n0");
}

/// The error with its causes.
fn anyhow_like(e: &(dyn std::error::Error + 'static)) -> String {
    liqo_types::chain(e)
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
    // Like the liqo-ipam service, which has no call for it.
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

//! The orchestration against the in-memory IPAM and fake sinks: the exchange, idempotence,
//! the refusals, the gateway move; the rollback of `peer` and `unpeer` is in [`rollback`].

use liqo_types::{Cidr, ClusterId};

use crate::{
    Error, Refusal, Step,
    fakes::{FakeSide, Faults, side, snapshot},
    ipam::{self, Ranges},
    move_gateway, peer, unpeer,
};

mod rollback;

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

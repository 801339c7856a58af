//! `peer` and `unpeer` of two clusters, with the ordering the data plane needs and a rollback
//! of every step that ran when a later one fails.
//!
//! `peer`: the IPAM exchange on both sides; both gateway peer lists built before either is
//! written; both written; both handshaken; both overlays applied; both records saved. Every
//! undo is pushed before its step runs (a step may take effect and still fail, e.g. a remap
//! whose answer was lost), and every undo is idempotent.
//! `unpeer`: both sides checked first; both gateways drop the peer (and it is gone from their
//! status); both overlays applied; both records saved; both IPAMs release last. A failed
//! release is not rolled back (the ranges could come back elsewhere): it is reported
//! ([`Error::StillHeld`]), and unpeering again, once both records are gone, releases what an
//! IPAM still holds.

use liqo_types::{ClusterId, PeerView};

use crate::{
    error::{Error, RollbackFailure, Step, StepError, at},
    ipam::{self, Ipam},
    plan::{self, ClusterInfo, Peerings, Refusal},
    rollback::{self, Undo, Wait, Which},
    sinks::{Gateway, Inventory, Overlay, Records, Side},
};

pub(crate) async fn info<I, G, O, N: Inventory, R>(
    s: &mut Side<I, G, O, N, R>,
) -> Result<ClusterInfo, Error> {
    s.inventory
        .cluster()
        .await
        .map_err(|e| Error::Inventory(Box::new(e)))
}

pub(crate) async fn load<I, G, O, N, R: Records>(
    s: &mut Side<I, G, O, N, R>,
    id: &ClusterId,
    op: &str,
) -> Result<Peerings, Error> {
    s.records
        .load()
        .await
        .map_err(|e| Error::failed(op, at(Step::LoadRecords, id)(e), Vec::new()))
}

/// Peers `a` and `b` (idempotent: peering again changes nothing). Returns how `a` sees `b` and
/// how `b` sees `a` (the mirror of the first).
pub async fn peer<I, G, O, N, R>(
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
) -> Result<(PeerView, PeerView), Error>
where
    I: Ipam,
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    let (ia, ib) = (info(a).await?, info(b).await?);
    let op = format!("peering {} with {}", ia.id, ib.id);
    plan::check_pair(&ia, &ib).map_err(|refusal| Error::Refused {
        op: op.clone(),
        refusal,
    })?;
    let (ra, rb) = (load(a, &ia.id, &op).await?, load(b, &ib.id, &op).await?);
    let mut undo = Vec::new();
    match peer_steps(a, b, (&ia, &ib), (&ra, &rb), &mut undo).await {
        Ok(v) => Ok(v),
        Err(e) => {
            let failed = rollback::run(undo, a, b, (&ia.id, &ib.id)).await;
            Err(Error::failed(&op, e, failed))
        }
    }
}

async fn peer_steps<I, G, O, N, R>(
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
    (ia, ib): (&ClusterInfo, &ClusterInfo),
    (ra, rb): (&Peerings, &Peerings),
    undo: &mut Vec<Undo>,
) -> Result<(PeerView, PeerView), StepError>
where
    I: Ipam,
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    // The IPAM exchange: each side decides where the other's ranges appear, then records the
    // other's decision.
    let ann_a = ipam::announce(&mut a.ipam, ia.pod_cidr)
        .await
        .map_err(at(Step::ExternalCidr, &ia.id))?;
    let ann_b = ipam::announce(&mut b.ipam, ib.pod_cidr)
        .await
        .map_err(at(Step::ExternalCidr, &ib.id))?;
    let here_a = decide(a, &ia.id, &ib.id, Which::A, ann_b, undo).await?;
    let here_b = decide(b, &ib.id, &ia.id, Which::B, ann_a, undo).await?;
    let view_a = ipam::record(&mut a.ipam, &ib.id, here_a, here_b)
        .await
        .map_err(at(Step::SetPeerView(ib.id.clone()), &ia.id))?;
    let view_b = ipam::record(&mut b.ipam, &ia.id, here_b, here_a)
        .await
        .map_err(at(Step::SetPeerView(ia.id.clone()), &ib.id))?;

    // Everything both sides will run, built before anything is written.
    let ka = a
        .gateway
        .public_key()
        .await
        .map_err(at(Step::PublicKey, &ia.id))?;
    let kb = b
        .gateway
        .public_key()
        .await
        .map_err(at(Step::PublicKey, &ib.id))?;
    let mut new_a = ra.clone();
    new_a.insert(ib.id.clone(), plan::record(view_a, ib, kb));
    let mut new_b = rb.clone();
    new_b.insert(ia.id.clone(), plan::record(view_b, ia, ka));
    let (old_oa, oa) = overlays(a, &ia.id, ra, &new_a).await?;
    let (old_ob, ob) = overlays(b, &ib.id, rb, &new_b).await?;

    for (which, s, me, peer, old, new) in [
        (Which::A, &mut *a, ia, ib, ra, &new_a),
        (Which::B, &mut *b, ib, ia, rb, &new_b),
    ] {
        undo.push(Undo::Gateway {
            which,
            peers: plan::gateway_peers(old),
            wait: (!old.contains_key(&peer.id)).then(|| Wait::Gone(peer.id.clone())),
        });
        s.gateway
            .write(&plan::gateway_peers(new))
            .await
            .map_err(at(Step::WriteGateway, &me.id))?;
    }
    a.gateway
        .wait_handshaken(&ib.id)
        .await
        .map_err(at(Step::Handshake(ib.id.clone()), &ia.id))?;
    b.gateway
        .wait_handshaken(&ia.id)
        .await
        .map_err(at(Step::Handshake(ia.id.clone()), &ib.id))?;
    settle(
        a,
        b,
        (ia, ib),
        [(old_oa, oa), (old_ob, ob)],
        [(ra, &new_a), (rb, &new_b)],
        undo,
    )
    .await?;
    Ok((view_a, view_b))
}

/// One side's step 1 of the exchange: what it holds for `peer` is read and its undo pushed
/// before the remap, which may take effect and still fail.
async fn decide<I: Ipam, G, O, N, R>(
    s: &mut Side<I, G, O, N, R>,
    me: &ClusterId,
    peer: &ClusterId,
    which: Which,
    announced: ipam::Ranges,
    undo: &mut Vec<Undo>,
) -> Result<ipam::Ranges, StepError> {
    let before = s
        .ipam
        .peer(peer)
        .await
        .map_err(at(Step::ReadIpam(peer.clone()), me))?;
    undo.push(Undo::Ipam {
        which,
        peer: peer.clone(),
        before,
    });
    ipam::decide(&mut s.ipam, peer, announced)
        .await
        .map_err(at(Step::Remap(peer.clone()), me))
}

/// The overlay plans of a side before and after a change of its peerings.
async fn overlays<I, G, O, N: Inventory, R>(
    s: &mut Side<I, G, O, N, R>,
    id: &ClusterId,
    old: &Peerings,
    new: &Peerings,
) -> Result<(plan::OverlayPlan, plan::OverlayPlan), StepError> {
    let nodes = s.inventory.nodes().await.map_err(at(Step::Inventory, id))?;
    let gw = s
        .inventory
        .gateway_node()
        .await
        .map_err(at(Step::Inventory, id))?;
    let plan = |p: &Peerings| plan::overlay(id, &nodes, &gw, p).map_err(at(Step::Plan, id));
    Ok((plan(old)?, plan(new)?))
}

/// The last steps of a change on both sides, each undo recorded before its step: every overlay
/// agent on its new plan, then the new records saved.
async fn settle<I, G, O: Overlay, N, R: Records>(
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
    (ia, ib): (&ClusterInfo, &ClusterInfo),
    [(old_oa, oa), (old_ob, ob)]: [(plan::OverlayPlan, plan::OverlayPlan); 2],
    [(ra, new_a), (rb, new_b)]: [(&Peerings, &Peerings); 2],
    undo: &mut Vec<Undo>,
) -> Result<(), StepError> {
    for (which, s, me, old, new) in [
        (Which::A, &mut *a, ia, old_oa, &oa),
        (Which::B, &mut *b, ib, old_ob, &ob),
    ] {
        undo.push(Undo::Overlay { which, plan: old });
        apply_overlay(s, &me.id, new).await?;
    }
    for (which, s, me, old, new) in [
        (Which::A, &mut *a, ia, ra, new_a),
        (Which::B, &mut *b, ib, rb, new_b),
    ] {
        undo.push(Undo::Records {
            which,
            peerings: old.clone(),
        });
        s.records
            .save(new)
            .await
            .map_err(at(Step::SaveRecords, &me.id))?;
    }
    Ok(())
}

pub(crate) async fn apply_overlay<I, G, O: Overlay, N, R>(
    s: &mut Side<I, G, O, N, R>,
    id: &ClusterId,
    plan: &plan::OverlayPlan,
) -> Result<(), StepError> {
    s.overlay
        .write(plan)
        .await
        .map_err(at(Step::WriteOverlay, id))?;
    s.overlay
        .wait_applied(plan)
        .await
        .map_err(at(Step::ApplyOverlay, id))
}

/// Undoes [`peer`]. Both sides are checked before anything changes; the IPAMs release last.
/// When both records are gone already (an earlier unpeering whose release failed), it
/// releases what an IPAM still holds for the other side; refused when nothing is held.
pub async fn unpeer<I, G, O, N, R>(
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
) -> Result<(), Error>
where
    I: Ipam,
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    let (ia, ib) = (info(a).await?, info(b).await?);
    let op = format!("unpeering {} and {}", ia.id, ib.id);
    let (ra, rb) = (load(a, &ia.id, &op).await?, load(b, &ib.id, &op).await?);
    let not_peered = |me: &ClusterInfo, peer: &ClusterInfo| Error::Refused {
        op: op.clone(),
        refusal: Refusal::NotPeered {
            cluster: me.id.clone(),
            peer: peer.id.clone(),
        },
    };
    match (ra.contains_key(&ib.id), rb.contains_key(&ia.id)) {
        (true, true) => {}
        (false, false) => {
            let held_a = a.ipam.peer(&ib.id).await.map_err(|e| {
                Error::failed(
                    &op,
                    at(Step::ReadIpam(ib.id.clone()), &ia.id)(e),
                    Vec::new(),
                )
            })?;
            let held_b = b.ipam.peer(&ia.id).await.map_err(|e| {
                Error::failed(
                    &op,
                    at(Step::ReadIpam(ia.id.clone()), &ib.id)(e),
                    Vec::new(),
                )
            })?;
            if held_a.is_none() && held_b.is_none() {
                return Err(not_peered(&ia, &ib));
            }
            return release(a, b, (&ia.id, &ib.id), &op).await;
        }
        (false, true) => return Err(not_peered(&ia, &ib)),
        (true, false) => return Err(not_peered(&ib, &ia)),
    }
    let mut undo = Vec::new();
    match unpeer_steps(a, b, (&ia, &ib), (&ra, &rb), &mut undo).await {
        Ok(()) => release(a, b, (&ia.id, &ib.id), &op).await,
        Err(e) => {
            let failed = rollback::run(undo, a, b, (&ia.id, &ib.id)).await;
            Err(Error::failed(&op, e, failed))
        }
    }
}

/// Releases what each IPAM holds for the other side (both are tried); a failure is
/// [`Error::StillHeld`].
async fn release<I: Ipam, G, O, N, R>(
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
    (ida, idb): (&ClusterId, &ClusterId),
    op: &str,
) -> Result<(), Error> {
    let mut failed = Vec::new();
    for (s, me, peer) in [(&mut *a, ida, idb), (&mut *b, idb, ida)] {
        if let Err(e) = ipam::restore(&mut s.ipam, peer, None).await {
            failed.push((peer.clone(), e.on(me)));
        }
    }
    let mut failed = failed.into_iter();
    match failed.next() {
        None => Ok(()),
        Some((peer, e)) => Err(Error::StillHeld {
            op: op.into(),
            cluster: e.cluster,
            peer,
            step: e.step,
            source: e.source,
            also: failed.next().map(|(_, e)| RollbackFailure::from(e)),
        }),
    }
}

async fn unpeer_steps<I, G, O, N, R>(
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
    (ia, ib): (&ClusterInfo, &ClusterInfo),
    (ra, rb): (&Peerings, &Peerings),
    undo: &mut Vec<Undo>,
) -> Result<(), StepError>
where
    I: Ipam,
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    let mut new_a = ra.clone();
    new_a.remove(&ib.id);
    let mut new_b = rb.clone();
    new_b.remove(&ia.id);
    let (old_oa, oa) = overlays(a, &ia.id, ra, &new_a).await?;
    let (old_ob, ob) = overlays(b, &ib.id, rb, &new_b).await?;
    for (which, s, me, peer, old, new) in [
        (Which::A, &mut *a, ia, ib, ra, &new_a),
        (Which::B, &mut *b, ib, ia, rb, &new_b),
    ] {
        undo.push(Undo::Gateway {
            which,
            peers: plan::gateway_peers(old),
            wait: Some(Wait::Handshaken(peer.id.clone())),
        });
        s.gateway
            .write(&plan::gateway_peers(new))
            .await
            .map_err(at(Step::WriteGateway, &me.id))?;
    }
    a.gateway
        .wait_gone(&ib.id)
        .await
        .map_err(at(Step::PeerGone(ib.id.clone()), &ia.id))?;
    b.gateway
        .wait_gone(&ia.id)
        .await
        .map_err(at(Step::PeerGone(ia.id.clone()), &ib.id))?;
    settle(
        a,
        b,
        (ia, ib),
        [(old_oa, oa), (old_ob, ob)],
        [(ra, &new_a), (rb, &new_b)],
        undo,
    )
    .await?;
    Ok(())
}

//! `peer` and `unpeer` of two clusters, with the ordering the data plane needs and a rollback
//! of every step that ran when a later one fails.
//!
//! `peer`: the IPAM exchange on both sides; both gateway peer lists built before either is
//! written; both written; both handshaken; both overlays applied; both records saved.
//! `unpeer`: both sides checked first; both gateways drop the peer (and it is gone from their
//! status); both overlays applied; both IPAMs release; both records saved.

use liqo_types::{ClusterId, PeerView};

use crate::{
    error::{Error, Step, StepError, at},
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
    let da = ipam::decide(&mut a.ipam, &ib.id, ann_b)
        .await
        .map_err(at(Step::Remap(ib.id.clone()), &ia.id))?;
    undo.push(Undo::Ipam {
        which: Which::A,
        peer: ib.id.clone(),
        before: da.before,
    });
    let db = ipam::decide(&mut b.ipam, &ia.id, ann_a)
        .await
        .map_err(at(Step::Remap(ia.id.clone()), &ib.id))?;
    undo.push(Undo::Ipam {
        which: Which::B,
        peer: ia.id.clone(),
        before: db.before,
    });
    let view_a = ipam::record(&mut a.ipam, &ib.id, da.seen_here, db.seen_here)
        .await
        .map_err(at(Step::SetPeerView(ib.id.clone()), &ia.id))?;
    let view_b = ipam::record(&mut b.ipam, &ia.id, db.seen_here, da.seen_here)
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
    for (which, s, me, old, new) in [
        (Which::A, &mut *a, ia, old_oa, &oa),
        (Which::B, &mut *b, ib, old_ob, &ob),
    ] {
        undo.push(Undo::Overlay { which, plan: old });
        apply_overlay(s, &me.id, new).await?;
    }
    for (which, s, me, old, new) in [
        (Which::A, &mut *a, ia, ra, &new_a),
        (Which::B, &mut *b, ib, rb, &new_b),
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
    Ok((view_a, view_b))
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

/// Undoes [`peer`]. Both sides are checked before anything changes.
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
    for (me, r, peer) in [(&ia, &ra, &ib), (&ib, &rb, &ia)] {
        if !r.contains_key(&peer.id) {
            return Err(Error::Refused {
                op,
                refusal: Refusal::NotPeered {
                    cluster: me.id.clone(),
                    peer: peer.id.clone(),
                },
            });
        }
    }
    let mut undo = Vec::new();
    match unpeer_steps(a, b, (&ia, &ib), (&ra, &rb), &mut undo).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let failed = rollback::run(undo, a, b, (&ia.id, &ib.id)).await;
            Err(Error::failed(&op, e, failed))
        }
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
    for (which, s, me, old, new) in [
        (Which::A, &mut *a, ia, old_oa, &oa),
        (Which::B, &mut *b, ib, old_ob, &ob),
    ] {
        undo.push(Undo::Overlay { which, plan: old });
        apply_overlay(s, &me.id, new).await?;
    }
    for (which, s, me, peer) in [(Which::A, &mut *a, ia, ib), (Which::B, &mut *b, ib, ia)] {
        let held = s
            .ipam
            .peer(&peer.id)
            .await
            .map_err(at(Step::ReadIpam(peer.id.clone()), &me.id))?;
        // An IPAM that holds nothing for the peer has nothing to release.
        if let Some(held) = held {
            undo.push(Undo::Reacquire {
                which,
                peer: peer.id.clone(),
                held,
            });
            s.ipam
                .release(&peer.id)
                .await
                .map_err(at(Step::Release(peer.id.clone()), &me.id))?;
        }
    }
    for (which, s, me, old, new) in [
        (Which::A, &mut *a, ia, ra, &new_a),
        (Which::B, &mut *b, ib, rb, &new_b),
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

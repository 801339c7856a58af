//! Undoing the steps of `peer` and `unpeer` that already ran, newest first.

use liqo_types::{ClusterId, GatewayPeer};

use crate::{
    error::{RollbackFailure, Step, StepError, at},
    ipam::{self, Ipam, IpamPeer},
    plan::{OverlayPlan, Peerings},
    sinks::{Gateway, Inventory, Overlay, Records, Side},
};

/// One of the two sides of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    A,
    B,
}

/// What to wait for after putting a gateway's list back.
#[derive(Debug, Clone)]
pub(crate) enum Wait {
    /// The peer added in this attempt is gone again.
    Gone(ClusterId),
    /// The peer removed in this attempt has a session again.
    Handshaken(ClusterId),
}

/// How to put back one thing that changed.
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    /// The IPAM's entry for `peer` back to `before` ([`ipam::restore`]).
    Ipam {
        which: Which,
        peer: ClusterId,
        before: Option<IpamPeer>,
    },
    /// The gateway's previous peer list.
    Gateway {
        which: Which,
        peers: Vec<GatewayPeer>,
        wait: Option<Wait>,
    },
    /// The overlay's previous plan.
    Overlay { which: Which, plan: OverlayPlan },
    /// The previous record.
    Records { which: Which, peerings: Peerings },
}

impl Undo {
    fn which(&self) -> Which {
        match self {
            Undo::Ipam { which, .. }
            | Undo::Gateway { which, .. }
            | Undo::Overlay { which, .. }
            | Undo::Records { which, .. } => *which,
        }
    }
}

/// Runs `undo` newest first against the sides `a` (ID `ids.0`) and `b` (`ids.1`); returns what
/// could not be put back.
pub(crate) async fn run<I, G, O, N, R>(
    undo: Vec<Undo>,
    a: &mut Side<I, G, O, N, R>,
    b: &mut Side<I, G, O, N, R>,
    ids: (&ClusterId, &ClusterId),
) -> Vec<RollbackFailure>
where
    I: Ipam,
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    let mut failed = Vec::new();
    for u in undo.into_iter().rev() {
        let (side, id) = match u.which() {
            Which::A => (&mut *a, ids.0),
            Which::B => (&mut *b, ids.1),
        };
        if let Err(e) = one(u, side, id).await {
            failed.push(RollbackFailure::from(e));
        }
    }
    failed
}

async fn one<I, G, O, N, R>(
    u: Undo,
    s: &mut Side<I, G, O, N, R>,
    id: &ClusterId,
) -> Result<(), StepError>
where
    I: Ipam,
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    match u {
        Undo::Ipam { peer, before, .. } => ipam::restore(&mut s.ipam, &peer, before)
            .await
            .map_err(|e| e.on(id)),
        Undo::Gateway { peers, wait, .. } => {
            s.gateway
                .write(&peers)
                .await
                .map_err(at(Step::WriteGateway, id))?;
            match wait {
                None => Ok(()),
                Some(Wait::Gone(p)) => s
                    .gateway
                    .wait_gone(&p)
                    .await
                    .map_err(at(Step::PeerGone(p.clone()), id)),
                Some(Wait::Handshaken(p)) => s
                    .gateway
                    .wait_handshaken(&p)
                    .await
                    .map_err(at(Step::Handshake(p.clone()), id)),
            }
        }
        Undo::Overlay { plan, .. } => {
            s.overlay
                .write(&plan)
                .await
                .map_err(at(Step::WriteOverlay, id))?;
            s.overlay
                .wait_applied(&plan)
                .await
                .map_err(at(Step::ApplyOverlay, id))
        }
        Undo::Records { peerings, .. } => s
            .records
            .save(&peerings)
            .await
            .map_err(at(Step::SaveRecords, id)),
    }
}

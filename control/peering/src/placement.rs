//! Moving a cluster's gateway to another node: drain it where it runs, point every overlay
//! agent at the new node, start it there (its public address follows it), wait until it has a
//! session with every peer and every agent followed. A failure puts it back where it was.

use std::time::{Duration, Instant};

use liqo_types::ClusterId;

use crate::{
    error::{Error, RollbackFailure, Step, StepError, at},
    peer::{apply_overlay, info, load},
    plan::{self, OverlayPlan, Peerings, Refusal},
    sinks::{Gateway, Inventory, Overlay, Records, Side},
};

/// What a gateway move did, with timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The node it left.
    pub from: String,
    /// The node it runs on now.
    pub to: String,
    /// Time to drain the old gateway.
    pub stopped: Duration,
    /// Time until the new gateway had a session with every peer and every overlay agent
    /// followed.
    pub ready: Duration,
}

/// Moves the gateway of `s` to node `to` (its IPAM is not used).
pub async fn move_gateway<I, G, O, N, R>(
    s: &mut Side<I, G, O, N, R>,
    to: &str,
) -> Result<Moved, Error>
where
    G: Gateway,
    O: Overlay,
    N: Inventory,
    R: Records,
{
    let me = info(s).await?;
    let op = format!("moving the gateway of {} to {to}", me.id);
    let fail = |e: StepError| Error::failed(&op, e, Vec::new());
    let nodes = s
        .inventory
        .nodes()
        .await
        .map_err(|e| fail(at(Step::Inventory, &me.id)(e)))?;
    let from = s
        .inventory
        .gateway_node()
        .await
        .map_err(|e| fail(at(Step::Inventory, &me.id)(e)))?;
    let refuse = |refusal| Error::Refused {
        op: op.clone(),
        refusal,
    };
    if !nodes.iter().any(|n| n.name == to) {
        return Err(refuse(Refusal::UnknownNode {
            cluster: me.id.clone(),
            node: to.into(),
            known: nodes.iter().map(|n| n.name.clone()).collect(),
        }));
    }
    if from == to {
        return Err(refuse(Refusal::AlreadyThere {
            cluster: me.id.clone(),
            node: to.into(),
        }));
    }
    let records = load(s, &me.id, &op).await?;
    let here = plan::overlay(&me.id, &nodes, &from, &records).map_err(refuse)?;
    let there = here.with_gateway(to);

    let t = Instant::now();
    if let Err(e) = s.gateway.stop().await {
        // It may have been killed without its own cleanup: start it again where it was (it
        // adopts what is left), and report that too if it fails.
        let mut failed = Vec::new();
        if let Err(e2) = s.gateway.start(&from).await {
            failed.push(RollbackFailure::from(at(
                Step::StartGateway(from.clone()),
                &me.id,
            )(e2)));
        }
        return Err(Error::failed(&op, at(Step::StopGateway, &me.id)(e), failed));
    }
    let stopped = t.elapsed();
    match move_steps(s, &me.id, to, &there, &records).await {
        Ok(()) => Ok(Moved {
            from,
            to: to.into(),
            stopped,
            ready: t.elapsed(),
        }),
        Err(e) => {
            let failed = back(s, &me.id, &from, &here).await;
            Err(Error::failed(&op, e, failed))
        }
    }
}

async fn move_steps<I, G, O, N, R>(
    s: &mut Side<I, G, O, N, R>,
    id: &ClusterId,
    to: &str,
    there: &OverlayPlan,
    records: &Peerings,
) -> Result<(), StepError>
where
    G: Gateway,
    O: Overlay,
{
    // Agents point at the new node first, so traffic follows as soon as it handshakes.
    s.overlay
        .write(there)
        .await
        .map_err(at(Step::WriteOverlay, id))?;
    s.gateway
        .start(to)
        .await
        .map_err(at(Step::StartGateway(to.into()), id))?;
    for peer in records.keys() {
        s.gateway
            .wait_handshaken(peer)
            .await
            .map_err(at(Step::Handshake(peer.clone()), id))?;
    }
    s.overlay
        .wait_applied(there)
        .await
        .map_err(at(Step::ApplyOverlay, id))
}

/// Puts the gateway back on `from` after a failed move: stops it, points the agents back,
/// starts it there; every step is tried and the failures are returned.
async fn back<I, G, O, N, R>(
    s: &mut Side<I, G, O, N, R>,
    id: &ClusterId,
    from: &str,
    here: &OverlayPlan,
) -> Vec<RollbackFailure>
where
    G: Gateway,
    O: Overlay,
{
    let mut failed = Vec::new();
    if let Err(e) = s.gateway.stop().await {
        failed.push(RollbackFailure::from(at(Step::StopGateway, id)(e)));
    }
    if let Err(e) = apply_overlay(s, id, here).await {
        failed.push(RollbackFailure::from(e));
    }
    if let Err(e) = s.gateway.start(from).await {
        failed.push(RollbackFailure::from(at(
            Step::StartGateway(from.into()),
            id,
        )(e)));
    }
    failed
}

//! The route operator, one per node: the Nodes, the gateway's Lease and every TunnelEndpoint →
//! this node's overlay config file (through [`routes::render`], i.e. the core's
//! [`liqo_peering::plan::overlay`] and `per_node`), written atomically; the agent's `/status`
//! tells when it runs it.
//!
//! Finalizer `net.liqo.io/route-operator`: every route operator holds it on every
//! TunnelEndpoint, each under its own field manager (`liqo-route-operator/<node>`), with
//! server-side apply, which keeps a finalizer while any manager holds it. A deleted
//! TunnelEndpoint's ranges leave this node's file at once; this operator drops its hold when
//! the agent runs that file, so the TunnelEndpoint goes (and the IPAM may give its ranges to
//! another peer) only once every node's agent dropped them. The hold of a node that is gone
//! for good (no Node object, or NotReady for longer than `--release-grace`) is forgotten by the
//! gateway node's operator (the Lease holder): its managedFields entry is removed, and the
//! finalizer with it when no one else holds it. An agent that cannot be read or refuses its
//! file for longer than the grace since the deletion does not hold the deletion: the hold is
//! released with a Warning Event (`control::network::release`). With no gateway (the Lease has no
//! holder) nothing is routed to one: holds on deleted TunnelEndpoints are released at once.

use std::{sync::Arc, time::Duration};

use control::consts::net;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Client,
    runtime::{controller::Action, events::Recorder},
};
use liqo_overlay_api::config::File;
use liqo_peering::Inventory;
use liqo_types::ClusterId;

use control::network::{
    release::{self, Release},
    routes,
};

use crate::{
    error::OpError,
    files::{self, Look},
    kube::{self as k, KubeError, KubeInventory, TepRecords},
    metrics::Metrics,
};

/// The program name; the field manager is `liqo-route-operator/<node>`.
pub const PROGRAM: &str = "liqo-route-operator";
/// How soon to look again while the agent has not applied the file.
pub const PENDING: Duration = Duration::from_secs(1);
/// How soon to look again when all is settled.
pub const SETTLED: Duration = Duration::from_secs(30);

/// The field manager of the route operator of `node`.
pub fn manager(node: &str) -> String {
    format!("{PROGRAM}/{node}")
}

pub use crate::runner::Dataplane;

/// What the operator is told.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Liqo namespace (the Lease, the identity).
    pub namespace: String,
    /// This node.
    pub node_name: String,
    /// The agent's fixed settings (no nodes, no ranges).
    pub base: File,
    /// The data plane.
    pub dataplane: Dataplane,
    /// How long a deleted TunnelEndpoint waits for an agent that cannot be read or refuses its
    /// file, and how long a node may be NotReady before its holds are forgotten.
    pub release_grace: Duration,
}

/// The operator's state.
pub struct Ctx {
    /// Its client.
    pub client: Client,
    /// Its settings.
    pub settings: Settings,
    /// The cluster's ID (in the plan's messages).
    pub cluster: ClusterId,
    /// Its metrics.
    pub metrics: Metrics,
    /// Its field manager.
    pub manager: String,
    /// Its Warning Events.
    pub recorder: Recorder,
}

/// One reconcile of this node's agent.
pub async fn reconcile(_me: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, OpError> {
    ctx.metrics.reconciles.inc();
    let s = &ctx.settings;
    let mut inv = KubeInventory {
        client: ctx.client.clone(),
        namespace: s.namespace.clone(),
        pod_cidr: None,
        endpoint: None,
    };
    // The core's inventory and record over the cluster's objects.
    let nodes = inv.nodes().await?;
    let k::Snapshot {
        objects: objs,
        teps,
        mut peerings,
        ..
    } = TepRecords {
        client: ctx.client.clone(),
    }
    .read()
    .await?;
    // The hold first: ranges are routed only once their deletion waits for this node's agent.
    let mut first_error = k::hold_first(
        &ctx.client,
        &objs,
        &teps,
        &mut peerings,
        &ctx.manager,
        net::ROUTE_FINALIZER,
    )
    .await;
    let gateway_node = match inv.gateway_node().await {
        Ok(n) => n,
        Err(KubeError::Object { .. }) => {
            // No gateway: nothing is routed to one, so no deleted TunnelEndpoint waits on
            // this node (holds on the others are taken above).
            for (obj, t) in objs.iter().zip(&teps) {
                let owns = k::owns_finalizer(&obj.metadata, &ctx.manager, net::ROUTE_FINALIZER);
                if !(t.deleting && owns) {
                    continue;
                }
                tracing::info!(tep = %t.key(), "no gateway runs; finalizer hold released");
                k::hold_finalizer(&ctx.client, obj, &ctx.manager, net::ROUTE_FINALIZER, false)
                    .await?;
            }
            return Err(OpError::NoGateway(format!(
                "{}/{}",
                s.namespace,
                net::GATEWAY_LEASE
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let rendered = routes::render(
        &s.base,
        &ctx.cluster,
        &s.node_name,
        &nodes,
        &gateway_node,
        &peerings,
    )?;
    for (peer, e) in &rendered.refused {
        tracing::warn!(%peer, error = %e, "ranges left out of the overlay");
    }
    let mut unreachable = false;
    let applied = match &s.dataplane {
        Dataplane::Fake => Look::Ready,
        Dataplane::Files { config, status, .. } => {
            let files::Ensured { digest: d, written } =
                files::ensure_config(config, &rendered.text)?;
            if written {
                ctx.metrics.writes.inc();
                tracing::info!(config = %config.display(), digest = %d, gateway = %gateway_node, ranges = rendered.file.remote_cidrs.len(), "overlay config written");
            }
            match files::fetch_async::<liqo_overlay_api::status::Status>(status).await {
                Ok(st) => files::overlay_look(&st, &d),
                Err(e) => {
                    unreachable = true;
                    Look::NotYet(liqo_types::chain(&e))
                }
            }
        }
    };
    if let Look::Refused(e) = &applied {
        tracing::error!(error = %e, "the overlay agent refused its config");
    }
    let mut pending = 0;
    // Why the agent cannot confirm (unreadable, or refusing the file); `None`: only slow.
    let failing = match (&s.dataplane, &applied) {
        (_, Look::Refused(e)) => Some(format!("the overlay agent refuses its config ({e})")),
        (Dataplane::Files { .. }, Look::NotYet(why)) if unreachable => {
            Some(format!("the overlay agent's status cannot be read ({why})"))
        }
        _ => None,
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    for (obj, t) in objs.iter().zip(&teps) {
        let owns = k::owns_finalizer(&obj.metadata, &ctx.manager, net::ROUTE_FINALIZER);
        let r = match (t.deleting, owns) {
            (true, true) if applied == Look::Ready => {
                tracing::info!(tep = %t.key(), "the agent dropped its ranges; finalizer hold released");
                k::hold_finalizer(&ctx.client, obj, &ctx.manager, net::ROUTE_FINALIZER, false).await
            }
            (true, true) => match release::unconfirmed(t, failing.as_deref(), now, s.release_grace)
            {
                Release::Forced(note) => {
                    tracing::warn!(tep = %t.key(), %note, "finalizer hold released without the agent");
                    k::warning(&ctx.recorder, obj, "ReleasedUnconfirmed", "Release", note).await;
                    k::hold_finalizer(&ctx.client, obj, &ctx.manager, net::ROUTE_FINALIZER, false)
                        .await
                }
                _ => {
                    pending += 1;
                    Ok(())
                }
            },
            _ => Ok(()),
        };
        if let Err(e) = r {
            tracing::warn!(tep = %t.key(), error = %liqo_types::chain(&e), "a finalizer");
            first_error.get_or_insert(e);
        }
    }
    if applied != Look::Ready {
        pending += 1;
    }
    // The gateway node's operator forgets the holds of nodes that are gone for good (their
    // operators will never release them), so a deleted TunnelEndpoint does not wait forever.
    if s.node_name == gateway_node && teps.iter().any(|t| t.deleting) {
        let names = release::standing_nodes(&inv.node_objects().await?, now, s.release_grace);
        let prefix = manager("");
        for (obj, t) in objs.iter().zip(&teps).filter(|(_, t)| t.deleting) {
            let dead = k::dead_holds(&obj.metadata, net::ROUTE_FINALIZER, &prefix, &names);
            if dead.is_empty() {
                continue;
            }
            tracing::warn!(tep = %t.key(), gone = ?dead.iter().map(|d| &d.1).collect::<Vec<_>>(), "forgetting the route holds of nodes that are gone (or NotReady past the grace)");
            if let Err(e) = k::prune_holds(&ctx.client, obj, net::ROUTE_FINALIZER, &dead).await {
                first_error.get_or_insert(e);
            }
        }
    }
    ctx.metrics
        .peers
        .set(peerings.len().try_into().unwrap_or(i64::MAX));
    ctx.metrics
        .refused
        .set(rendered.refused.len().try_into().unwrap_or(i64::MAX));
    ctx.metrics.pending.set(pending);
    if let Some(e) = first_error {
        return Err(e.into());
    }
    Ok(Action::requeue(if pending > 0 { PENDING } else { SETTLED }))
}

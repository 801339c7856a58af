//! Moving a cluster's gateway in Kubernetes mode, as a drain would: the old node is cordoned,
//! the gateway operator and the gateway there are stopped (SIGTERM: the gateway removes what it
//! created), the public link follows, and the operator and the gateway are started on the new
//! node; that operator takes the Lease at once, so the route operators re-render every overlay
//! towards the new node. Reports the same figures as the lab's own `move-gateway`.

use std::time::{Duration, Instant};

use dataplane::supervisor;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use liqo_peering::Moved;

use super::{K8sLab, K8sLabError, fabric, restart};
use crate::lab::{cluster::gateway_node, daemons, wan};

/// How long a stopped process may take to exit.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long the new gateway may take to be ready.
const READY_SECS: u64 = 30;

/// Moves the gateway of `cluster` to node `to`.
pub async fn move_gateway(k: &K8sLab, cluster: &str, to: &str) -> Result<Moved, K8sLabError> {
    let lab = &k.lab;
    if super::is_chart(&lab.prefix) {
        return Err(K8sLabError::lab(
            format!("moving the gateway of {cluster}"),
            "Liqo runs from its chart here: its gateway is a pod the scheduler places (with two \
             replicas, `liqo-lab kill-gateway` shows the failover)",
        ));
    }
    let c = lab
        .topology
        .cluster(cluster)
        .ok_or_else(|| K8sLabError::lab(format!("cluster {cluster}"), "not in the lab"))?;
    let from = gateway_node(lab, c)?;
    if c.node(to).is_none() {
        let known: Vec<String> = c.nodes.iter().map(|n| n.name.to_string()).collect();
        return Err(K8sLabError::lab(
            format!("moving the gateway of {cluster}"),
            format!("no node {to:?}; nodes: {}", known.join(", ")),
        ));
    }
    if from == to {
        return Err(K8sLabError::lab(
            format!("moving the gateway of {cluster}"),
            format!("it runs on {to} already"),
        ));
    }
    let client = k.client(cluster).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            &from,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})),
        )
        .await
        .map_err(K8sLabError::kube(format!("cordoning {from}")))?;

    let t = Instant::now();
    for program in [fabric::GATEWAY_OPERATOR, "liqo-gateway"] {
        let p = restart::find(lab, cluster, &from, program)?;
        if matches!(
            supervisor::stop(&p, STOP_GRACE),
            supervisor::Stopped::Stuck | supervisor::Stopped::Killed
        ) {
            tracing::warn!(program, node = %from, "needed SIGKILL");
        }
    }
    let stopped = t.elapsed();
    let (from_ns, to_ns) = (lab.node(c, &from)?, lab.node(c, to)?);
    wan::relocate(lab, c, &from_ns, &to_ns).await?;
    let installed = k
        .liqo
        .get(cluster)
        .ok_or_else(|| K8sLabError::lab(format!("Liqo on {cluster}"), "not installed"))?;
    let kubeconfig = installed
        .dir
        .join("node")
        .join(format!("{}.kubeconfig", fabric::GATEWAY_OPERATOR));
    fabric::spawn_gateway_operator(lab, c, to, &kubeconfig)?;
    let p = daemons::spawn_gateway(lab, c, to)?;
    super::super::state::write_atomic(&lab.files(c).gateway_node(), to)?;
    daemons::gateway_up(lab, c, &to_ns, &p).await?;

    // Ready: a session with every peer of a TunnelEndpoint, every overlay agent runs its file
    // and that file routes to the new node.
    let peers: Vec<String> = super::views::tunnels(k)
        .await?
        .into_iter()
        .filter(|t| t.cluster == cluster)
        .map(|t| {
            k.liqo
                .get(&t.peer)
                .map_or(t.peer.clone(), |i| i.cluster_id.clone())
        })
        .collect();
    let files = lab.files(c);
    daemons::wait_for(
        READY_SECS,
        &format!("the gateway of {cluster} on {to} and every overlay agent"),
        || {
            let s = match daemons::gateway_status(&to_ns) {
                Ok(s) => s,
                Err(e) => return daemons::Poll::NotYet(e.to_string()),
            };
            for id in &peers {
                let hs = s
                    .peers
                    .iter()
                    .any(|p| &p.id == id && p.handshake_age_secs.is_some());
                if !hs {
                    return daemons::Poll::NotYet(format!("no handshake with {id}"));
                }
            }
            for n in &c.nodes {
                let path = files.overlay_config(n.name.as_str());
                // The route operator rewrites the file; until it holds the new gateway, say why.
                let text = match std::fs::read_to_string(&path) {
                    Ok(t) => t,
                    Err(e) => return daemons::Poll::NotYet(format!("{}: {e}", path.display())),
                };
                match serde_saphyr::from_str::<::overlay::config::File>(&text) {
                    Ok(f) if f.gateway == to => {}
                    Ok(_) => {
                        return daemons::Poll::NotYet(format!("{} still routes to {from}", n.name));
                    }
                    Err(e) => return daemons::Poll::NotYet(format!("{}: {e}", path.display())),
                }
                let ns = match lab.node(c, n.name.as_str()) {
                    Ok(ns) => ns,
                    Err(e) => return daemons::Poll::Failed(e),
                };
                let status = match daemons::overlay_status(&ns) {
                    Ok(s) => s,
                    Err(e) => return daemons::Poll::NotYet(e.to_string()),
                };
                match daemons::runs(&status.reload, &liqo_daemon::digest(&text)) {
                    daemons::Poll::Ready(()) => {}
                    other => return other,
                }
            }
            daemons::Poll::Ready(())
        },
    )
    .await?;
    Ok(Moved {
        from,
        to: to.to_owned(),
        stopped,
        ready: t.elapsed(),
    })
}

//! What the control plane built, read back: each cluster's TunnelEndpoints turned into the
//! peer views `check` probes (never the lab's own records), and the ForeignClusters' NETWORKING
//! status.

use control::network::tunnel::view;
use control::{
    api::{
        discovery::ForeignCluster,
        net::{ConnectionStatus, TunnelEndpoint},
    },
    consts::net,
};
use kube::{Api, api::ListParams};
use liqo_types::PeerView;

use super::{K8sLab, K8sLabError};
use crate::lab::check::{self, Matrix};

/// One TunnelEndpoint as read back.
#[derive(Debug, Clone)]
pub struct Tunnel {
    /// The cluster it is in.
    pub cluster: String,
    /// The peer it leads to (its lab name, or its cluster ID if it is no lab cluster).
    pub peer: String,
    /// The view it describes.
    pub view: PeerView,
    /// Its `status.connection.status`.
    pub connection: Option<ConnectionStatus>,
}

/// Every TunnelEndpoint of every cluster of the lab.
pub async fn tunnels(k: &K8sLab) -> Result<Vec<Tunnel>, K8sLabError> {
    let mut out = Vec::new();
    for c in &k.set.clusters {
        let api: Api<TunnelEndpoint> = Api::all(c.client().await?);
        let list = api
            .list(&ListParams::default().labels(net::TEP_CLUSTER_ID_LABEL))
            .await
            .map_err(K8sLabError::kube(format!(
                "listing the TunnelEndpoints of {}",
                c.name
            )))?;
        for t in list.items {
            let peer_id = t.spec.cluster_id.to_string();
            out.push(Tunnel {
                cluster: c.name.clone(),
                peer: k.name_of(&peer_id).unwrap_or(&peer_id).to_owned(),
                view: view(&t.spec),
                connection: t
                    .status
                    .as_ref()
                    .and_then(|s| s.connection.as_ref())
                    .and_then(|c| c.status),
            });
        }
    }
    Ok(out)
}

/// The peerings to probe: one per TunnelEndpoint whose peer is a lab cluster.
pub async fn peerings(k: &K8sLab) -> Result<Vec<(String, String, PeerView)>, K8sLabError> {
    Ok(tunnels(k)
        .await?
        .into_iter()
        .filter(|t| k.lab.topology.cluster(&t.peer).is_some())
        .map(|t| (t.cluster, t.peer, t.view))
        .collect())
}

/// `check` in Kubernetes mode: every pod to every pod of its cluster and, through every
/// TunnelEndpoint, of the peer.
pub async fn check(k: &K8sLab) -> Result<Matrix, K8sLabError> {
    let views = peerings(k).await?;
    let lab = k.lab.clone();
    Ok(
        tokio::task::spawn_blocking(move || check::with_views(&lab, &views))
            .await
            .map_err(|e| K8sLabError::lab("running the probes", e))??,
    )
}

/// Each ForeignCluster of `cluster` as `(name, NETWORKING status)` (the status as
/// `kubectl get foreignclusters` prints it; `None` when unset).
pub async fn networking(k: &K8sLab, cluster: &str) -> Result<Vec<(String, String)>, K8sLabError> {
    let api: Api<ForeignCluster> = Api::all(k.client(cluster).await?);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(K8sLabError::kube(format!(
            "listing the ForeignClusters of {cluster}"
        )))?;
    Ok(list
        .items
        .iter()
        .map(|fc| {
            let status = serde_json::to_value(fc)
                .ok()
                .and_then(|v| {
                    v.pointer("/status/peeringConditions")?
                        .as_array()?
                        .iter()
                        .find(|c| c["type"] == "NetworkStatus")
                        .and_then(|c| c["status"].as_str().map(str::to_owned))
                })
                .unwrap_or_else(|| "None".into());
            (fc.metadata.name.clone().unwrap_or_default(), status)
        })
        .collect())
}

//! Reads with a bare client (no controller context): a peer's ForeignCluster.

use control::api::{ClusterId, discovery::ForeignCluster};
use kube::{Api, Client, api::ListParams};

/// The ForeignCluster of a peer, matched by `spec.clusterIdentity.clusterID` (the
/// `discovery.liqo.io/cluster-id` label only appears after its first reconcile); the oldest
/// when there are several (`control::peering::objects::oldest`).
pub async fn find_foreign_cluster(
    client: &Client,
    id: &ClusterId,
) -> Result<Option<ForeignCluster>, kube::Error> {
    let api: Api<ForeignCluster> = Api::all(client.clone());
    let all = api.list(&ListParams::default()).await?;
    Ok(control::peering::objects::oldest(&all.items, id).cloned())
}

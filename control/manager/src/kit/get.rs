//! Reads with a bare client (no controller context): a peer's ForeignCluster.

use control::api::{ClusterId, discovery::ForeignCluster};
use kube::{Api, Client, ResourceExt, api::ListParams};

/// The ForeignCluster of a peer, matched by `spec.clusterIdentity.clusterID` (the
/// `discovery.liqo.io/cluster-id` label only appears after its first reconcile); the oldest
/// when there are several.
pub async fn find_foreign_cluster(
    client: &Client,
    id: &ClusterId,
) -> Result<Option<ForeignCluster>, kube::Error> {
    let api: Api<ForeignCluster> = Api::all(client.clone());
    let all = api.list(&ListParams::default()).await?;
    Ok(all
        .items
        .into_iter()
        .filter(|f| f.spec.cluster_identity.cluster_id == *id)
        .min_by_key(|f| (f.creation_timestamp().map(|t| t.0), f.name_any())))
}

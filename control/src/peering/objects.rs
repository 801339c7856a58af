//! The objects the ForeignCluster controller writes, built whole from their inputs: the
//! `discovery.liqo.io/cluster-id` label patch of a ForeignCluster, our tenant namespace for a
//! peer (annotated with our cluster ID, which the peer checks its identity's API server with),
//! our ResourceRequest to the peer (a replicator source; `withdrawal` stamps
//! `spec.withdrawalTimestamp`); and which ForeignCluster of a peer is processed (the oldest).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::{
    api::{
        ClusterId,
        discovery::{ClusterIdentity, ForeignCluster, ResourceRequest},
    },
    consts::{annotations, labels, values},
};

/// Whether another ForeignCluster in `all` names the same peer as `fc` and is older (by
/// creation time, then name): then `fc` is a duplicate and not processed.
pub fn older_duplicate(all: &[ForeignCluster], fc: &ForeignCluster) -> bool {
    let key = |f: &ForeignCluster| (f.creation_timestamp().map(|t| t.0), f.name_any());
    let peer = &fc.spec.cluster_identity.cluster_id;
    all.iter().any(|o| {
        o.name_any() != fc.name_any()
            && o.spec.cluster_identity.cluster_id == *peer
            && key(o) < key(fc)
    })
}

/// The patch that labels ForeignCluster `name` with its peer's cluster ID.
pub fn cluster_id_label(name: &str, peer: &ClusterId) -> Value {
    json!({
        "apiVersion": ForeignCluster::api_version(&()), "kind": ForeignCluster::kind(&()),
        "metadata": {"name": name, "labels": {labels::CLUSTER_ID: peer.as_str()}},
    })
}

/// Our tenant namespace `tenant` for `peer`.
pub fn tenant_namespace(tenant: &str, peer: &ClusterId, local: &ClusterId) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": tenant, "labels": {
            labels::CLUSTER_ID: peer.as_str(),
            labels::TENANT_NAMESPACE: values::TRUE,
        }, "annotations": {
            // The peer checks with it that the API server behind its identity is ours.
            annotations::HOST_CLUSTER_ID: local.as_str(),
        }},
    })
}

/// Our ResourceRequest `name` in tenant namespace `tenant` to `peer`, owned by `owner` (the
/// ForeignCluster's controller reference, when it has one).
pub fn resource_request(
    name: &str,
    tenant: &str,
    local: &ClusterIdentity,
    auth_url: &str,
    peer: &ClusterId,
    owner: Option<Value>,
    withdrawal: Option<&Time>,
) -> Value {
    let mut spec = json!({"clusterIdentity": local, "authUrl": auth_url});
    if let Some(t) = withdrawal {
        spec["withdrawalTimestamp"] = serde_json::to_value(t).expect("a time serializes");
    }
    json!({
        "apiVersion": ResourceRequest::api_version(&()), "kind": ResourceRequest::kind(&()),
        "metadata": {
            "name": name, "namespace": tenant,
            "labels": {
                labels::REPLICATION: values::TRUE,
                labels::REMOTE_ID: peer.as_str(),
            },
            "ownerReferences": owner.into_iter().collect::<Vec<_>>(),
        },
        "spec": spec,
    })
}

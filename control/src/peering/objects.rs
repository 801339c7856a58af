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

/// The order of a peer's ForeignClusters: by creation time, then name. The first is the one
/// processed; the others are duplicates.
fn age(f: &ForeignCluster) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (f.creation_timestamp().map(|t| t.0), f.name_any())
}

/// The ForeignCluster of `peer` in `all` that counts: the oldest naming it.
pub fn oldest<'a>(all: &'a [ForeignCluster], peer: &ClusterId) -> Option<&'a ForeignCluster> {
    all.iter()
        .filter(|f| f.spec.cluster_identity.cluster_id == *peer)
        .min_by_key(|f| age(f))
}

/// Whether another ForeignCluster in `all` names the same peer as `fc` and is older
/// ([`oldest`]'s order): then `fc` is a duplicate and not processed.
pub fn older_duplicate(all: &[ForeignCluster], fc: &ForeignCluster) -> bool {
    let peer = &fc.spec.cluster_identity.cluster_id;
    all.iter().any(|o| {
        o.name_any() != fc.name_any()
            && o.spec.cluster_identity.cluster_id == *peer
            && age(o) < age(fc)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(name: &str, peer: &str, created: &str) -> ForeignCluster {
        serde_json::from_value(json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"clusterIdentity": {"clusterID": peer, "clusterName": peer},
                "foreignAuthUrl": "https://x"},
        }))
        .unwrap()
    }

    #[test]
    fn the_oldest_foreign_cluster_of_a_peer_counts_and_the_others_are_duplicates() {
        let all = [
            fc("b", "milan", "2026-01-01T00:00:00Z"),
            fc("a", "milan", "2026-01-01T00:00:00Z"),
            fc("c", "milan", "2025-12-31T00:00:00Z"),
            fc("d", "turin", "2020-01-01T00:00:00Z"),
        ];
        let milan: ClusterId = "milan".parse().unwrap();
        assert_eq!(oldest(&all, &milan).map(|f| f.name_any()), Some("c".into()));
        assert!(!older_duplicate(&all, &all[2]));
        // Same time: the name decides.
        assert!(older_duplicate(&all, &all[0]));
        assert!(older_duplicate(&all, &all[1]));
        assert!(!older_duplicate(&all, &all[3]));
        assert_eq!(oldest(&all, &"rome".parse().unwrap()), None);
    }

    #[test]
    fn the_tenant_namespace_and_the_request_carry_what_the_peer_checks() {
        let rome: ClusterId = "rome".parse().unwrap();
        let milan: ClusterId = "milan".parse().unwrap();
        let ns = tenant_namespace("liqo-tenant-milan", &milan, &rome);
        assert_eq!(ns["metadata"]["labels"][labels::CLUSTER_ID], "milan");
        assert_eq!(ns["metadata"]["labels"][labels::TENANT_NAMESPACE], "true");
        assert_eq!(
            ns["metadata"]["annotations"][annotations::HOST_CLUSTER_ID],
            "rome"
        );
        let local = ClusterIdentity {
            cluster_id: rome.clone(),
            cluster_name: "rome".parse().unwrap(),
        };
        let owner = json!({"uid": "u"});
        let rr = resource_request("rome", "t", &local, "https://a", &milan, Some(owner), None);
        assert_eq!(rr["metadata"]["labels"][labels::REMOTE_ID], "milan");
        assert_eq!(rr["metadata"]["labels"][labels::REPLICATION], "true");
        assert_eq!(rr["metadata"]["ownerReferences"][0]["uid"], "u");
        assert_eq!(rr["spec"]["authUrl"], "https://a");
        assert!(rr["spec"].get("withdrawalTimestamp").is_none());
        let t = Time("2026-11-28T00:00:00Z".parse().unwrap());
        let rr = resource_request("rome", "t", &local, "https://a", &milan, None, Some(&t));
        assert_eq!(rr["spec"]["withdrawalTimestamp"], "2026-11-28T00:00:00Z");
        assert_eq!(rr["metadata"]["ownerReferences"], json!([]));
        let l = cluster_id_label("fc", &milan);
        assert_eq!(l["metadata"]["labels"][labels::CLUSTER_ID], "milan");
    }
}

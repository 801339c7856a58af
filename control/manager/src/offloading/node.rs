//! The virtual node of an accepted offer (§2.2), until the virtual kubelet takes it over:
//! [`NodeLauncher`] applies the Node built by `control::forge::node` from the offer copy and
//! the peer's ForeignCluster (capacity = allocatable = the offer's quota, so a new offer
//! re-applies it), writes its status Ready, and renews its Lease `kube-node-lease/<node>` in a
//! task per node (restarted when the Node is re-created under a new UID); `stop` ends the task
//! and deletes the Node (its Lease goes with it, owned). A Node of that name that is not this
//! peer's virtual node ([`claim`]) is neither written nor deleted: the launch fails naming it.
//!
//! It never decides when a node should exist (the ResourceOffer controller does) and never
//! runs pods on it.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use control::{
    api::{discovery::ForeignCluster, sharing::ResourceOffer},
    forge::node::{
        NodeInput, has_resources, node_name, reported_conditions, virtual_node, virtual_node_status,
    },
};
use futures::future::BoxFuture;
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Node},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions},
};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::{
    FIELD_MANAGER,
    context::now,
    launcher::{LaunchError, Launcher, Peer},
};

/// The namespace of the nodes' Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// A Lease's duration, in seconds.
pub const LEASE_SECONDS: i32 = 40;
/// How often a Lease is renewed.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// The port the node announces for its kubelet.
pub const KUBELET_PORT: u16 = 10250;

/// Applies virtual nodes and keeps them Ready.
pub struct NodeLauncher {
    client: Client,
    /// Per node name: the UID its task writes in the Lease's ownerReference, and the task.
    leases: Mutex<HashMap<String, (String, JoinHandle<()>)>>,
}

/// Whether the Node named for `peer`'s virtual node may be written or deleted by it: when
/// absent, or when it is a virtual node (`liqo.io/type=virtual-node`) of that peer
/// (`liqo.io/remote-cluster-id=<peer>`). Otherwise the error says whose Node it is.
pub fn claim(node: Option<&Node>, peer: &str) -> Result<(), String> {
    let Some(node) = node else { return Ok(()) };
    let labels = node.labels();
    let virtual_node = labels
        .get(control::consts::labels::NODE_TYPE)
        .map(String::as_str)
        == Some(control::consts::values::VIRTUAL_NODE);
    if !virtual_node {
        return Err(format!(
            "Node {} exists and is not a virtual node",
            node.name_any()
        ));
    }
    match labels.get(control::consts::labels::REMOTE_CLUSTER_ID) {
        Some(owner) if owner == peer => Ok(()),
        Some(owner) => Err(format!(
            "Node {} is the virtual node of cluster {owner}",
            node.name_any()
        )),
        None => Err(format!(
            "Node {} is a virtual node without a {} label",
            node.name_any(),
            control::consts::labels::REMOTE_CLUSTER_ID
        )),
    }
}

impl NodeLauncher {
    /// A launcher writing to our apiserver.
    pub fn new(client: Client) -> Self {
        NodeLauncher {
            client,
            leases: Mutex::new(HashMap::new()),
        }
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, JoinHandle<()>)>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn start_node(&self, peer: &Peer) -> Result<(), LaunchError> {
        let fail = |what: String| LaunchError {
            peer: peer.cluster_id.clone(),
            message: what,
        };
        let offers: Api<ResourceOffer> = Api::namespaced(self.client.clone(), &peer.namespace);
        let offer = offers
            .get(&peer.offer)
            .await
            .map_err(|e| fail(format!("get ResourceOffer {}: {e}", peer.offer)))?;
        let fcs: Api<ForeignCluster> = Api::all(self.client.clone());
        let fc = fcs
            .list(&ListParams::default())
            .await
            .map_err(|e| fail(format!("list ForeignClusters: {e}")))?
            .items
            .into_iter()
            .filter(|f| f.spec.cluster_identity.cluster_id == peer.cluster_id)
            .min_by_key(|f| (f.creation_timestamp().map(|t| t.0), f.name_any()))
            .ok_or_else(|| fail("no ForeignCluster names this peer".into()))?;
        let version = self
            .client
            .apiserver_version()
            .await
            .map_err(|e| fail(format!("apiserver version: {e}")))?;
        let capacity = offer
            .spec
            .resource_quota
            .as_ref()
            .and_then(|q| q.hard.clone())
            .unwrap_or_default();
        let input = NodeInput {
            remote: &fc.spec.cluster_identity,
            offer_labels: &offer.spec.labels,
            capacity: &capacity,
            storage: !offer.spec.storage_classes.is_empty(),
            kubelet_version: &version.git_version,
            address: None,
            port: KUBELET_PORT,
        };
        for rejected in control::forge::node::rejected_offer_labels(&input) {
            tracing::warn!(peer = %peer.cluster_id, "{rejected}");
        }
        let name = node_name(&input).to_string();
        let mut node = serde_json::to_value(virtual_node(&input))
            .map_err(|e| fail(format!("node {name}: {e}")))?;
        node["apiVersion"] = json!("v1");
        node["kind"] = json!("Node");
        let nodes: Api<Node> = Api::all(self.client.clone());
        let existing = nodes
            .get_opt(&name)
            .await
            .map_err(|e| fail(format!("get Node {name}: {e}")))?;
        claim(existing.as_ref(), peer.cluster_id.as_str()).map_err(fail)?;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = nodes
            .patch(&name, &params, &Patch::Apply(&node))
            .await
            .map_err(|e| fail(format!("apply Node {name}: {e}")))?;
        let since = applied.creation_timestamp().unwrap_or_else(now);
        let status = ready_status(&input, &since);
        let status = json!({"apiVersion": "v1", "kind": "Node", "status": status});
        nodes
            .patch_status(&name, &params, &Patch::Apply(&status))
            .await
            .map_err(|e| fail(format!("apply status of Node {name}: {e}")))?;
        let uid = applied
            .uid()
            .ok_or_else(|| fail(format!("Node {name} without a UID")))?;
        let mut leases = self.leases();
        let running = leases
            .get(&name)
            .map(|(u, t)| (u.as_str(), t.is_finished()));
        if needs_task(running, &uid) {
            let task = tokio::spawn(renew(self.client.clone(), name.clone(), uid.clone()));
            if let Some((_, old)) = leases.insert(name, (uid, task)) {
                // The Node was re-created: the old task names the old UID in the Lease's owner.
                old.abort();
            }
        }
        Ok(())
    }

    async fn stop_node(&self, peer: &Peer) -> Result<(), LaunchError> {
        let fail = |what: String| LaunchError {
            peer: peer.cluster_id.clone(),
            message: what,
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default().labels(&format!(
                "{}={},{}={}",
                control::consts::labels::NODE_TYPE,
                control::consts::values::VIRTUAL_NODE,
                control::consts::labels::REMOTE_CLUSTER_ID,
                peer.cluster_id.as_str()
            )))
            .await
            .map_err(|e| fail(format!("list virtual nodes: {e}")))?;
        for node in list.items {
            let name = node.name_any();
            claim(Some(&node), peer.cluster_id.as_str()).map_err(fail)?;
            if let Some((_, task)) = self.leases().remove(&name) {
                task.abort();
            }
            // Deletes the Node listed, not one re-created since under the same name.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: node.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match nodes.delete(&name, &params).await {
                Ok(_) => {}
                // Gone, or re-created since (the UID precondition fails: 409), not ours to delete.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(fail(format!("delete Node {name}: {e}"))),
            }
        }
        Ok(())
    }
}

/// The node's status with the conditions its owner reports (`control::forge::node::
/// reported_conditions`): Ready when the offer has resources, the pressures when it has none;
/// NetworkUnavailable left out (the network is not this launcher's to observe). `since` is the
/// same on every apply: nothing changes until the offer does.
pub fn ready_status(i: &NodeInput<'_>, since: &Time) -> k8s_openapi::api::core::v1::NodeStatus {
    let mut status = virtual_node_status(i, since);
    status.conditions = Some(reported_conditions(has_resources(i.capacity), None, since));
    status
}

/// Whether the Lease of a node whose UID is `uid` needs a new task, given the running one's
/// (UID, finished): none, one that ended, or one for an earlier Node of that name (its Lease's
/// ownerReference names the old UID, and the garbage collector would delete the Lease).
pub fn needs_task(running: Option<(&str, bool)>, uid: &str) -> bool {
    running.is_none_or(|(u, finished)| finished || u != uid)
}

/// The node's Lease as applied: holder = the node, 40 s, renewed `at`, owned by the node.
pub fn lease(node: &str, uid: &str, at: MicroTime) -> serde_json::Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": at},
    })
}

/// Renews a node's Lease every [`RENEW_EVERY`] until aborted.
async fn renew(client: Client, node: String, uid: String) {
    let api: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    loop {
        let at = MicroTime(now().0);
        if let Err(e) = api
            .patch(&node, &params, &Patch::Apply(&lease(&node, &uid, at)))
            .await
        {
            // Retried at the next tick: a missed renewal is one of four within the duration.
            tracing::warn!(%node, error = %e, "renewing the virtual node's Lease");
        }
        tokio::time::sleep(RENEW_EVERY).await;
    }
}

impl Launcher for NodeLauncher {
    fn start<'a>(&'a self, peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(self.start_node(peer))
    }

    fn stop<'a>(&'a self, peer: &'a Peer) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(self.stop_node(peer))
    }
}

impl Drop for NodeLauncher {
    fn drop(&mut self) {
        for (_, task) in self.leases().values() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests;

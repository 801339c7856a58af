//! The virtual-node controller on a consumer (§3): for each virtual node
//! (`liqo.io/type=virtual-node`), finalizer `virtualnode-controller.liqo.io/finalizer` and a
//! NamespaceMap named after the provider's UniqueName in its tenant namespace, labelled as a
//! replicator source for the provider, controlled by the node; on the node's deletion, the maps
//! are deleted and the finalizer dropped once they are gone.
//!
//! It never fills a map's `desiredMapping` (the NamespaceOffloading controller does) nor
//! creates remote namespaces (the provider's NamespaceMap controller does).

use std::sync::Arc;

use control::{
    api::{ClusterId, virtualkubelet::NamespaceMap},
    consts::{labels, offloading::VIRTUAL_NODE_CONTROLLER_FINALIZER as FINALIZER, values},
    names::UniqueName,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::{Context, apply, controller_ref, set_finalizers, with_finalizer},
    error::{Error, kube as kerr},
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "virtualnode";

/// What the controller observes for one virtual node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The node is being deleted.
    pub deleting: bool,
    /// It carries [`FINALIZER`].
    pub has_finalizer: bool,
    /// The provider's local tenant namespace, once its ForeignCluster names it.
    pub tenant_namespace: Option<String>,
    /// The NamespaceMaps of the provider (namespace, name, being deleted).
    pub maps: Vec<(String, String, bool)>,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Add [`FINALIZER`].
    AddFinalizer,
    /// Apply the NamespaceMap in this tenant namespace.
    ApplyMap(String),
    /// Delete this NamespaceMap (namespace, name).
    DeleteMap(String, String),
    /// Drop [`FINALIZER`]: the maps are gone.
    RemoveFinalizer,
}

/// The decisions for one virtual node: while it stands, the finalizer then its map (once the
/// tenant namespace is known); once deleted, delete the maps, then drop the finalizer when
/// none is left (a map still terminating keeps it).
pub fn decide(o: &Observed) -> Vec<Action> {
    if o.deleting {
        if !o.has_finalizer {
            return Vec::new();
        }
        if o.maps.is_empty() {
            return vec![Action::RemoveFinalizer];
        }
        return o
            .maps
            .iter()
            .filter(|(_, _, deleting)| !deleting)
            .map(|(ns, name, _)| Action::DeleteMap(ns.clone(), name.clone()))
            .collect();
    }
    let mut actions = Vec::new();
    if !o.has_finalizer {
        actions.push(Action::AddFinalizer);
    }
    if let Some(ns) = &o.tenant_namespace {
        actions.push(Action::ApplyMap(ns.clone()));
    }
    actions
}

/// The selector of a provider's NamespaceMaps (our sources for it).
pub fn maps_selector(peer: &ClusterId) -> String {
    format!("{}={}", labels::REMOTE_CLUSTER_ID, peer.as_str())
}

/// The NamespaceMap of a provider: labels for the replicator (a source for the peer), owned by
/// the node. `desiredMapping` is left to the NamespaceOffloading controller.
pub fn namespace_map(
    name: &str,
    ns: &str,
    peer: &ClusterId,
    owner: serde_json::Value,
) -> serde_json::Value {
    json!({
        "apiVersion": NamespaceMap::api_version(&()), "kind": NamespaceMap::kind(&()),
        "metadata": {"name": name, "namespace": ns,
            "labels": {
                labels::REMOTE_CLUSTER_ID: peer.as_str(),
                labels::REPLICATION: values::TRUE,
                labels::REMOTE_ID: peer.as_str(),
            },
            "ownerReferences": [owner]},
        "spec": {},
    })
}

/// One reconcile of a virtual node.
pub async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let name = node.name_any();
    let Some(peer) = node
        .labels()
        .get(labels::REMOTE_CLUSTER_ID)
        .and_then(|id| id.parse::<ClusterId>().ok())
    else {
        tracing::warn!(node = %name, "virtual node without a valid {}", labels::REMOTE_CLUSTER_ID);
        return Ok(Requeue::await_change());
    };
    let fc = crate::request::foreign_cluster(&ctx, &peer).await?;
    let tenant_namespace = fc
        .as_ref()
        .and_then(|f| f.status.as_ref()?.tenant_namespace.as_ref()?.local.clone());
    let maps_api: Api<NamespaceMap> = Api::all(ctx.client.clone());
    let maps = maps_api
        .list(&ListParams::default().labels(&maps_selector(&peer)))
        .await
        .map_err(kerr(format!("list NamespaceMaps of {peer}")))?;
    let observed = Observed {
        deleting: node.meta().deletion_timestamp.is_some(),
        has_finalizer: node.finalizers().iter().any(|f| f == FINALIZER),
        tenant_namespace,
        maps: maps
            .items
            .iter()
            .filter(|m| {
                m.labels().get(labels::REPLICATION).map(String::as_str) == Some(values::TRUE)
            })
            .map(|m| {
                let ns = m.namespace().unwrap_or_default();
                (ns, m.name_any(), m.meta().deletion_timestamp.is_some())
            })
            .collect(),
    };
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let actions = decide(&observed);
    let waiting = observed.deleting && !actions.contains(&Action::RemoveFinalizer);
    for action in actions {
        match action {
            Action::AddFinalizer | Action::RemoveFinalizer => {
                let list =
                    with_finalizer(node.finalizers(), FINALIZER, action == Action::AddFinalizer);
                set_finalizers(&nodes, &name, node.resource_version().as_deref(), list).await?;
            }
            Action::ApplyMap(ns) => {
                let Some(fc) = &fc else { continue };
                let map = UniqueName::new(&fc.spec.cluster_identity).to_string();
                let Some(owner) = controller_ref(node.as_ref()) else {
                    return Err(Error::Incomplete("node UID"));
                };
                let api: Api<NamespaceMap> = Api::namespaced(ctx.client.clone(), &ns);
                apply(&api, &map, &namespace_map(&map, &ns, &peer, owner)).await?;
            }
            Action::DeleteMap(ns, map) => {
                let api: Api<NamespaceMap> = Api::namespaced(ctx.client.clone(), &ns);
                match api.delete(&map, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(kerr(format!("delete NamespaceMap {ns}/{map}"))(e)),
                }
            }
        }
    }
    if waiting {
        // The maps' deletion (the replicator's finalizer) is watched; poll as well.
        return Ok(Requeue::requeue(std::time::Duration::from_secs(2)));
    }
    Ok(Requeue::requeue(ctx.settings.resync))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(deleting: bool, has: bool, ns: Option<&str>, maps: &[(&str, bool)]) -> Observed {
        Observed {
            deleting,
            has_finalizer: has,
            tenant_namespace: ns.map(str::to_owned),
            maps: maps
                .iter()
                .map(|(n, d)| ("liqo-tenant-milan".to_owned(), n.to_string(), *d))
                .collect(),
        }
    }

    #[test]
    fn a_standing_node_gets_the_finalizer_then_its_map_once_the_tenant_namespace_is_known() {
        assert_eq!(decide(&o(false, false, None, &[])), [Action::AddFinalizer]);
        assert_eq!(
            decide(&o(false, false, Some("t"), &[])),
            [Action::AddFinalizer, Action::ApplyMap("t".into())]
        );
        assert_eq!(
            decide(&o(false, true, Some("t"), &[("m", false)])),
            [Action::ApplyMap("t".into())]
        );
    }

    #[test]
    fn a_deleted_node_deletes_its_maps_and_keeps_the_finalizer_until_they_are_gone() {
        assert_eq!(
            decide(&o(true, true, Some("t"), &[("m", false), ("n", true)])),
            [Action::DeleteMap("liqo-tenant-milan".into(), "m".into())]
        );
        assert_eq!(decide(&o(true, true, Some("t"), &[("n", true)])), []);
        assert_eq!(
            decide(&o(true, true, Some("t"), &[])),
            [Action::RemoveFinalizer]
        );
        assert_eq!(decide(&o(true, false, Some("t"), &[])), []);
    }

    #[test]
    fn the_map_is_a_replicator_source_for_the_provider() {
        let peer: ClusterId = "5c6a3e4f-1111-4c2d-9a9b-000000000001".parse().unwrap();
        let m = namespace_map("milan-abc", "liqo-tenant-milan", &peer, json!({"uid": "u"}));
        let l = &m["metadata"]["labels"];
        assert_eq!(l[labels::REPLICATION], "true");
        assert_eq!(l[labels::REMOTE_ID], peer.as_str());
        assert_eq!(l[labels::REMOTE_CLUSTER_ID], peer.as_str());
        assert_eq!(m["metadata"]["ownerReferences"][0]["uid"], "u");
        assert_eq!(
            m["spec"],
            json!({}),
            "desiredMapping is the offloading controller's"
        );
    }
}

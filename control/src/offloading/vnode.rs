//! The virtual-node controller's decisions on a consumer (§3): for each virtual node, its
//! finalizer and the provider's NamespaceMap (a replicator source for the provider, owned by
//! the node); on its deletion the maps go, then the finalizer. The controller-manager's
//! `offloading::vnode` carries them out.

use kube::Resource;
use serde_json::json;

use crate::{
    api::{ClusterId, virtualkubelet::NamespaceMap},
    consts::{labels, values},
};

/// What the controller observes for one virtual node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The node is being deleted.
    pub deleting: bool,
    /// It carries the finalizer (`consts::offloading::VIRTUAL_NODE_CONTROLLER_FINALIZER`).
    pub has_finalizer: bool,
    /// The provider's local tenant namespace, once its ForeignCluster names it.
    pub tenant_namespace: Option<String>,
    /// The NamespaceMaps of the provider (namespace, name, being deleted).
    pub maps: Vec<(String, String, bool)>,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Add the finalizer (`consts::offloading::VIRTUAL_NODE_CONTROLLER_FINALIZER`).
    AddFinalizer,
    /// Apply the NamespaceMap in this tenant namespace.
    ApplyMap(String),
    /// Delete this NamespaceMap (namespace, name).
    DeleteMap(String, String),
    /// Drop the finalizer (`consts::offloading::VIRTUAL_NODE_CONTROLLER_FINALIZER`): the maps are gone.
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

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
    offloading::vnode::{Action, Observed, decide, maps_selector, namespace_map},
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams},
    runtime::controller::Action as Requeue,
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::{apply, controller_ref, not_found, set_finalizers, with_finalizer},
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "virtualnode";

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
    let fc = crate::kit::foreign_cluster(&ctx, &peer).await?;
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
                api.delete(&map, &DeleteParams::default())
                    .await
                    .map(drop)
                    .or_else(not_found)
                    .map_err(kerr(format!("delete NamespaceMap {ns}/{map}")))?;
            }
        }
    }
    if waiting {
        // The maps' deletion (the replicator's finalizer) is watched; poll as well.
        return Ok(Requeue::requeue(std::time::Duration::from_secs(2)));
    }
    Ok(Requeue::requeue(ctx.settings.resync))
}

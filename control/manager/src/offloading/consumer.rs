//! The NamespaceOffloading controller on a consumer (§3), status writer included: observes a
//! NamespaceOffloading, its namespace, every NamespaceMap we keep for a provider and the
//! virtual nodes, and carries out `control::offloading::consumer::decide` in order (finalizer,
//! merge patch of the namespace's `liqo.io/scheduling-enabled`, merge patch of
//! `spec.desiredMapping.<namespace>` in the maps, Events, SSA of the status). The first
//! failing action stops the others but the status is written anyway.
//!
//! It never creates remote namespaces (the provider's NamespaceMap controller does, from the
//! replicated map) and never mutates pods (the webhook does).

use std::sync::Arc;

use control::{
    api::{
        ClusterId,
        offloading::{NamespaceOffloading, NamespaceOffloadingStatus},
        virtualkubelet::NamespaceMap,
    },
    consts::{
        labels,
        offloading::{NAMESPACE_OFFLOADING_FINALIZER as FINALIZER, SCHEDULING_ENABLED},
        values,
    },
    names::NamespaceName,
    offloading::consumer::{Action, NodeView, Observed, Peer, decide},
};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::{
    Api, Resource, ResourceExt,
    api::{ListParams, Patch},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::{apply_status, now, set_finalizers, with_finalizer},
    selectors::{source, virtual_nodes},
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "namespaceoffloading";

/// One reconcile of a NamespaceOffloading.
pub async fn reconcile(no: Arc<NamespaceOffloading>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let ns = no.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = no.name_any();
    let Ok(namespace) = ns.parse::<NamespaceName>() else {
        return Err(Error::Incomplete("a valid namespace name"));
    };
    let client = ctx.client.clone();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let labelled = namespaces
        .get_opt(&ns)
        .await
        .map_err(kerr(format!("get Namespace {ns}")))?
        .is_some_and(|n| {
            // `liqo.io/scheduling-enabled=false` is not labelled: the webhook selects `=true`.
            n.labels().get(SCHEDULING_ENABLED).map(String::as_str) == Some("true")
        });
    let maps = Api::<NamespaceMap>::all(client.clone())
        .list(&ListParams::default().labels(&source()))
        .await
        .map_err(kerr("list NamespaceMaps"))?
        .items;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&virtual_nodes()))
        .await
        .map_err(kerr("list virtual nodes"))?
        .items;
    let ids: Vec<Option<ClusterId>> = maps
        .iter()
        .map(|m| m.labels().get(labels::REMOTE_CLUSTER_ID)?.parse().ok())
        .collect();
    let map_names: Vec<(String, String)> = maps
        .iter()
        .map(|m| (m.namespace().unwrap_or_default(), m.name_any()))
        .collect();
    let empty = Default::default();
    let peers: Vec<Peer<'_>> = maps
        .iter()
        .zip(&ids)
        .zip(&map_names)
        .filter_map(|((m, id), (map_ns, map_name))| {
            let id = id.as_ref()?;
            let node = nodes
                .iter()
                .find(|n| {
                    n.labels()
                        .get(labels::REMOTE_CLUSTER_ID)
                        .map(String::as_str)
                        == Some(id.as_str())
                })
                .map(|n| NodeView {
                    name: n.metadata.name.as_deref().unwrap_or_default(),
                    labels: n.metadata.labels.as_ref().unwrap_or(&empty),
                    deleting: n.meta().deletion_timestamp.is_some(),
                });
            Some(Peer {
                map: map_name,
                map_namespace: map_ns,
                cluster_id: id,
                node,
                desired: m.spec.desired_mapping.get(&ns).map(String::as_str),
                current: m.status.as_ref().and_then(|s| s.current_mapping.get(&ns)),
            })
        })
        .collect();
    // A live virtual node whose NamespaceMap is not there yet would be judged "not
    // selected" (and `NoClusterSelected` reported as final): wait for the map, which the
    // virtual-node controller makes at once (upstream: #virtual nodes = #NamespaceMaps).
    let unmapped = nodes.iter().find(|n| {
        let id = n
            .labels()
            .get(labels::REMOTE_CLUSTER_ID)
            .map(String::as_str);
        n.meta().deletion_timestamp.is_none()
            && !ids.iter().flatten().any(|i| Some(i.as_str()) == id)
    });
    if let Some(n) = unmapped.filter(|_| no.meta().deletion_timestamp.is_none()) {
        tracing::debug!(node = %n.name_any(), "a virtual node without its NamespaceMap yet: retrying");
        return Ok(Requeue::requeue(std::time::Duration::from_secs(1)));
    }
    let status = no.status.clone().unwrap_or_default();
    let observed = Observed {
        namespace: &namespace,
        spec: &no.spec,
        generation: no.meta().generation,
        deleting: no.meta().deletion_timestamp.is_some(),
        has_finalizer: no.finalizers().iter().any(|f| f == FINALIZER),
        status: &status,
        labelled,
        peers: &peers,
        local: &ctx.local,
        now: now(),
    };
    let api: Api<NamespaceOffloading> = Api::namespaced(client.clone(), &ns);
    let mut failed: Option<Error> = None;
    let mut new_status: Option<NamespaceOffloadingStatus> = None;
    for action in decide(&observed) {
        if let Action::Status(s) = action {
            new_status = Some(s);
            continue;
        }
        if failed.is_some() {
            continue;
        }
        if let Err(e) = execute(&ctx, &no, &ns, &name, &api, action).await {
            failed = Some(e);
        }
    }
    if let Some(s) = new_status {
        let value = serde_json::to_value(&s).map_err(|e| {
            kerr("serialize the NamespaceOffloading status")(kube::Error::SerdeError(e))
        })?;
        apply_status(&api, &name, &value).await?;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(Requeue::requeue(ctx.settings.resync)),
    }
}

async fn execute(
    ctx: &Context,
    no: &NamespaceOffloading,
    ns: &str,
    name: &str,
    api: &Api<NamespaceOffloading>,
    action: Action,
) -> Result<(), Error> {
    let client = ctx.client.clone();
    match action {
        Action::AddFinalizer | Action::RemoveFinalizer => {
            let add = action == Action::AddFinalizer;
            let list = with_finalizer(no.finalizers(), FINALIZER, add);
            set_finalizers(api, name, no.resource_version().as_deref(), list).await
        }
        Action::Label | Action::Unlabel => {
            let value = (action == Action::Label).then_some(values::TRUE);
            let patch = json!({"metadata": {"labels": {SCHEDULING_ENABLED: value}}});
            Api::<Namespace>::all(client)
                .patch(ns, &crate::kit::merge_params(), &Patch::Merge(&patch))
                .await
                .map(drop)
                .map_err(kerr(format!("label Namespace {ns} {SCHEDULING_ENABLED}")))
        }
        Action::SetDesired {
            map_namespace,
            map,
            remote,
        } => patch_desired(ctx, &map_namespace, &map, ns, Some(&remote)).await,
        Action::RemoveDesired { map_namespace, map } => {
            patch_desired(ctx, &map_namespace, &map, ns, None).await
        }
        Action::Event {
            warning,
            reason,
            message,
        } => {
            crate::kit::event(ctx, &no.object_ref(&()), warning, reason, message).await;
            Ok(())
        }
        Action::Status(_) => Ok(()),
    }
}

async fn patch_desired(
    ctx: &Context,
    map_ns: &str,
    map: &str,
    local: &str,
    remote: Option<&str>,
) -> Result<(), Error> {
    let patch = json!({"spec": {"desiredMapping": {local: remote}}});
    Api::<NamespaceMap>::namespaced(ctx.client.clone(), map_ns)
        .patch(map, &crate::kit::merge_params(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(kerr(format!(
            "desiredMapping of NamespaceMap {map_ns}/{map}"
        )))
}

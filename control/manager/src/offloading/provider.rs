//! The NamespaceMap controller on a provider (§3): for each trusted copy of a consumer's
//! NamespaceMap (`liqo.io/replicated=true`, trusted as `crate::request::trusted` says),
//! observes the namespaces it names or manages and their RoleBindings, and carries out
//! `control::offloading::provider::decide`: namespaces created by POST (never adopted),
//! RoleBindings to `liqo-virtual-kubelet-remote` server-side applied, deletions with a UID
//! precondition, `status.currentMapping` (back to the consumer through its replicator),
//! Warning Events, finalizer `namespacemap-controller.liqo.io/finalizer`. The first failing
//! action stops the others but the status is written anyway.
//!
//! It never decides which namespaces a consumer wants (the consumer's NamespaceOffloading
//! controller does) and never touches a namespace another map or nobody manages.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use control::{
    api::{ClusterId, virtualkubelet::NamespaceMap},
    consts::{
        labels,
        offloading::{MANAGED_BY_NAMESPACE_MAP, NAMESPACE_MAP_FINALIZER as FINALIZER},
    },
    offloading::provider::{
        Action, NsView, Observed, binding_is_right, decide, namespace, role_binding,
    },
};
use k8s_openapi::api::{
    core::v1::{Namespace, PersistentVolumeClaim},
    rbac::v1::RoleBinding,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{ListParams, Patch, PostParams},
    runtime::{controller::Action as Requeue, reflector::ObjectRef},
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::{apply, apply_status, set_finalizers, with_finalizer},
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "namespacemap";

/// How soon a map is observed again after a write (its outcome is then reported).
pub const AGAIN: std::time::Duration = std::time::Duration::from_millis(500);
/// How soon a map whose namespace is kept for its data is looked at again.
pub const KEPT_AGAIN: std::time::Duration = std::time::Duration::from_secs(3);

/// The namespaces of a consumer this controller may have made.
pub fn namespaces_selector(origin: &ClusterId) -> String {
    format!("{}={}", labels::REMOTE_CLUSTER_ID, origin.as_str())
}

/// The NamespaceMap managing namespace `n` (its `liqo.io/managed-by-namespace-map`
/// annotation, `<map namespace>/<map name>`), the one map its events concern; none without it.
pub fn map_of(n: &Namespace) -> Option<ObjectRef<NamespaceMap>> {
    let (ns, name) = n
        .annotations()
        .get(MANAGED_BY_NAMESPACE_MAP)?
        .split_once('/')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .then(|| ObjectRef::new(name).within(ns))
}

fn view(n: &Namespace) -> NsView {
    NsView {
        uid: n.metadata.uid.clone().unwrap_or_default(),
        managed_by: n.annotations().get(MANAGED_BY_NAMESPACE_MAP).cloned(),
        terminating: n.meta().deletion_timestamp.is_some(),
        claims: Vec::new(),
    }
}

/// One reconcile of a NamespaceMap copy.
pub async fn reconcile(map: Arc<NamespaceMap>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let ns = map.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = map.name_any();
    let origin_label = map.labels().get(labels::ORIGIN_ID).map(String::as_str);
    let Some(origin) = origin_label.and_then(|o| o.parse::<ClusterId>().ok()) else {
        tracing::warn!(namespace = %ns, name, "NamespaceMap copy without a valid {}", labels::ORIGIN_ID);
        return Ok(Requeue::await_change());
    };
    if !crate::kit::trusted(
        &ctx,
        "NamespaceMap",
        &map.metadata,
        &ns,
        origin_label,
        &origin,
    )
    .await?
    {
        return Ok(Requeue::await_change());
    }
    let key = format!("{ns}/{name}");
    let client = ctx.client.clone();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let mut namespaces: BTreeMap<String, NsView> = ns_api
        .list(&ListParams::default().labels(&namespaces_selector(&origin)))
        .await
        .map_err(kerr(format!("list the namespaces of {origin}")))?
        .items
        .iter()
        .filter(|n| n.annotations().get(MANAGED_BY_NAMESPACE_MAP) == Some(&key))
        .map(|n| (n.name_any(), view(n)))
        .collect();
    let status = map.status.clone().unwrap_or_default();
    let named: BTreeSet<String> = map
        .spec
        .desired_mapping
        .values()
        .cloned()
        .chain(
            status
                .current_mapping
                .values()
                .filter_map(|c| c.remote_namespace.clone()),
        )
        .filter(|n| control::names::validate_label(n).is_ok())
        .collect();
    for n in named {
        if namespaces.contains_key(&n) {
            continue;
        }
        if let Some(found) = ns_api
            .get_opt(&n)
            .await
            .map_err(kerr(format!("get Namespace {n}")))?
        {
            namespaces.insert(n, view(&found));
        }
    }
    // The consumer's copies of its liqo claims (their data): a namespace holding any is kept.
    let claims = Api::<PersistentVolumeClaim>::all(client.clone())
        .list(&ListParams::default().labels(&format!("{}={origin}", labels::OFFLOADED_ORIGIN)))
        .await
        .map_err(kerr(format!("list the claims of {origin}")))?;
    // One being deleted (asked by name) holds nothing to keep.
    for c in claims
        .items
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        if let (Some(n), Some(v)) = (c.namespace(), c.metadata.name.clone())
            && let Some(view) = namespaces.get_mut(&n)
        {
            view.claims.push(v);
        }
    }
    let mut bindings = BTreeMap::new();
    for (n, v) in &namespaces {
        if v.managed_by.as_deref() != Some(key.as_str()) {
            continue;
        }
        let found = Api::<RoleBinding>::namespaced(client.clone(), n)
            .get_opt(&ns)
            .await
            .map_err(kerr(format!("get RoleBinding {n}/{ns}")))?;
        bindings.insert(
            n.clone(),
            found.is_some_and(|b| binding_is_right(&b, &origin)),
        );
    }
    let storage = ctx
        .settings
        .storage
        .as_ref()
        .map_or(control::consts::storage::NAMESPACE.to_owned(), |s| {
            s.namespace.clone()
        });
    let reserved = BTreeSet::from([ctx.settings.namespace.clone(), storage]);
    let observed = Observed {
        key: &key,
        desired: &map.spec.desired_mapping,
        current: &status.current_mapping,
        deleting: map.meta().deletion_timestamp.is_some(),
        has_finalizer: map.finalizers().iter().any(|f| f == FINALIZER),
        namespaces: &namespaces,
        bindings: &bindings,
        reserved: &reserved,
    };
    let api: Api<NamespaceMap> = Api::namespaced(client.clone(), &ns);
    let mut failed = None;
    let mut new_status = None;
    // A write whose outcome nothing watched reports (a RoleBinding) is observed again soon.
    let mut wrote = false;
    // A namespace kept for its data is looked at again soon (the claims' deletion is not
    // this controller's event).
    let mut kept = false;
    for action in decide(&observed) {
        if let Action::Status(s) = action {
            new_status = Some(s);
            continue;
        }
        kept |= matches!(
            action,
            Action::Event {
                reason: control::offloading::provider::HOLDS_DATA,
                ..
            }
        );
        wrote |= !matches!(action, Action::Event { .. });
        if failed.is_some() {
            continue;
        }
        if let Err(e) = execute(&ctx, &map, &key, &origin, &api, action).await {
            failed = Some(e);
        }
    }
    if let Some(current) = new_status {
        // Entries that go are removed by a merge patch first: a server-side apply that
        // empties the map it owned would leave it null, which the schema refuses.
        let gone: serde_json::Map<String, serde_json::Value> = status
            .current_mapping
            .keys()
            .filter(|k| !current.contains_key(*k))
            .map(|k| (k.clone(), serde_json::Value::Null))
            .collect();
        if !gone.is_empty() {
            let patch = serde_json::json!({"status": {"currentMapping": gone}});
            api.patch_status(&name, &crate::kit::merge_params(), &Patch::Merge(&patch))
                .await
                .map_err(kerr(format!("currentMapping of NamespaceMap {key}")))?;
        }
        let value = serde_json::json!({ "currentMapping": current });
        apply_status(&api, &name, &value).await?;
    }
    match failed {
        Some(e) => Err(e),
        None if wrote => Ok(Requeue::requeue(AGAIN)),
        None if kept => Ok(Requeue::requeue(KEPT_AGAIN)),
        None => Ok(Requeue::requeue(ctx.settings.resync)),
    }
}

async fn execute(
    ctx: &Context,
    map: &NamespaceMap,
    key: &str,
    origin: &ClusterId,
    api: &Api<NamespaceMap>,
    action: Action,
) -> Result<(), Error> {
    let name = map.name_any();
    let map_ns = map.namespace().unwrap_or_default();
    let ns_api: Api<Namespace> = Api::all(ctx.client.clone());
    match action {
        Action::AddFinalizer | Action::RemoveFinalizer => {
            let add = action == Action::AddFinalizer;
            let list = with_finalizer(map.finalizers(), FINALIZER, add);
            set_finalizers(api, &name, map.resource_version().as_deref(), list).await
        }
        Action::CreateNamespace {
            name: remote,
            original,
        } => {
            let object = namespace(&remote, &original, key, origin);
            match ns_api.create(&PostParams::default(), &object).await {
                Ok(_) => Ok(()),
                // Someone made it first: the next pass observes whose it is (never adopted).
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                Err(e) => Err(kerr(format!("create Namespace {remote}"))(e)),
            }
        }
        Action::ApplyBinding { namespace: remote } => {
            let binding = role_binding(&remote, key, &map_ns, origin);
            let mut value = serde_json::to_value(&binding)
                .map_err(|e| kerr("serialize a RoleBinding")(kube::Error::SerdeError(e)))?;
            value["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
            value["kind"] = "RoleBinding".into();
            let rb: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &remote);
            apply(&rb, &map_ns, &value).await.map(drop)
        }
        Action::DeleteNamespace { name: remote, uid } => {
            let params = control::requests::delete_by_uid(uid);
            match ns_api.delete(&remote, &params).await {
                Ok(_) => Ok(()),
                // Gone, or another namespace of that name now: the next pass observes.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
                Err(e) => Err(kerr(format!("delete Namespace {remote}"))(e)),
            }
        }
        Action::Event { reason, message } => {
            crate::kit::event(ctx, &map.object_ref(&()), true, reason, message).await;
            Ok(())
        }
        Action::Status(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(annotation: Option<&str>) -> Namespace {
        let mut n = Namespace::default();
        n.metadata.name = Some("liqo-demo".into());
        n.metadata.annotations =
            annotation.map(|a| [(MANAGED_BY_NAMESPACE_MAP.to_owned(), a.to_owned())].into());
        n
    }

    #[test]
    fn a_namespace_event_concerns_the_map_its_annotation_names_only() {
        let r = map_of(&ns(Some("liqo-tenant-rome-1/turin-2"))).unwrap();
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_str()),
            (Some("liqo-tenant-rome-1"), "turin-2")
        );
        for bad in [
            None,
            Some("turin-2"),
            Some("/turin-2"),
            Some("t/"),
            Some("a/b/c"),
        ] {
            assert!(map_of(&ns(bad)).is_none(), "{bad:?}");
        }
    }
}

//! The TunnelEndpoints, untyped: listing them, the finalizers each operator holds on them
//! (server-side apply, one field manager per operator) and the holds of gone nodes, their status,
//! Warning Events, and the addresses of the endpoint names they give.

use std::{collections::BTreeMap, net::SocketAddr};

use control::{api::net::TunnelEndpoint, consts::net};
use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Client, Resource,
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams},
    runtime::events::{Event, EventType, Recorder},
};

use super::error::{KubeError, api};
use control::network::tunnel::{Endpoint, Tep};

/// The TunnelEndpoint resource, for untyped access.
pub fn tep_resource() -> ApiResource {
    ApiResource::erase::<TunnelEndpoint>(&())
}

/// TunnelEndpoints of every namespace, untyped.
pub fn tep_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &tep_resource())
}

/// Every TunnelEndpoint with the `clusterID` label, untyped (one bad object does not hide the
/// others).
pub async fn list_teps(client: &Client) -> Result<Vec<DynamicObject>, KubeError> {
    let lp = ListParams::default().labels(net::TEP_CLUSTER_ID_LABEL);
    Ok(tep_api(client)
        .list(&lp)
        .await
        .map_err(api("listing TunnelEndpoints"))?
        .items)
}

/// Whether field manager `manager` owns `finalizer` on the object (applied it).
pub fn owns_finalizer(meta: &ObjectMeta, manager: &str, finalizer: &str) -> bool {
    let key = format!("v:{}", serde_json::Value::from(finalizer));
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(manager)
                && m.operation.as_deref() == Some("Apply")
                && m.subresource.as_deref().is_none_or(str::is_empty)
        })
        .any(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:metadata")?.get("f:finalizers")?.get(&key))
                .is_some()
        })
}

/// The field managers named `<prefix><node>` that hold `finalizer` (applied it), with the index
/// of their managedFields entry, whose node is not in `nodes` (gone for good: nothing will
/// release their hold).
pub fn dead_holds(
    meta: &ObjectMeta,
    finalizer: &str,
    prefix: &str,
    nodes: &[String],
) -> Vec<(usize, String)> {
    meta.managed_fields
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, m)| {
            let manager = m.manager.as_deref()?;
            let node = manager.strip_prefix(prefix)?;
            (!nodes.iter().any(|n| n == node) && owns_finalizer(meta, manager, finalizer))
                .then(|| (i, manager.to_owned()))
        })
        .collect()
}

/// Forgets the holds of `dead` (from [`dead_holds`]) on `finalizer`, and drops the finalizer
/// itself when no other manager holds it. A merge patch of the whole lists with the object's
/// resourceVersion: it fails (and is retried) if the object changed meanwhile.
pub async fn prune_holds(
    client: &Client,
    obj: &DynamicObject,
    finalizer: &str,
    dead: &[(usize, String)],
) -> Result<(), KubeError> {
    let is_dead = |m: Option<&str>| dead.iter().any(|(_, d)| Some(d.as_str()) == m);
    let entries = obj.metadata.managed_fields.clone().unwrap_or_default();
    let others = entries
        .iter()
        .filter(|m| !is_dead(m.manager.as_deref()))
        .filter_map(|m| m.manager.as_deref())
        .any(|m| owns_finalizer(&obj.metadata, m, finalizer));
    let kept: Vec<_> = entries
        .into_iter()
        .filter(|m| !is_dead(m.manager.as_deref()))
        .collect();
    let mut meta = serde_json::json!({
        "resourceVersion": obj.metadata.resource_version,
        "managedFields": kept,
    });
    if !others {
        let finalizers: Vec<&String> = obj
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != finalizer)
            .collect();
        meta["finalizers"] = serde_json::json!(finalizers);
    }
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &tep_resource())
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": meta})),
        )
        .await
        .map_err(api(format!(
            "forgetting the holds of gone nodes ({}) on TunnelEndpoint {ns}/{name}",
            dead.iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))?;
    Ok(())
}

/// A Warning Event on a TunnelEndpoint. A failure to record it is logged only (the log and
/// the status say the same).
pub async fn warning(
    recorder: &Recorder,
    obj: &DynamicObject,
    reason: &str,
    action: &str,
    note: String,
) {
    let reference = ObjectReference {
        api_version: Some(TunnelEndpoint::api_version(&()).into_owned()),
        kind: Some(TunnelEndpoint::kind(&()).into_owned()),
        name: obj.metadata.name.clone(),
        namespace: obj.metadata.namespace.clone(),
        uid: obj.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    let ev = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &reference).await {
        tracing::warn!(error = %e, "recording an Event");
    }
}

fn identity(obj: &DynamicObject) -> serde_json::Value {
    serde_json::json!({
        "name": obj.metadata.name,
        "namespace": obj.metadata.namespace,
        // A precondition: never applied to a newer object of the same name.
        "uid": obj.metadata.uid,
    })
}

/// Makes field manager `manager` hold `finalizer` on the TunnelEndpoint (`hold`), or drop its
/// hold (the finalizer goes once no manager holds it). Server-side apply: several managers may
/// hold the same finalizer (every route operator holds the route finalizer).
pub async fn hold_finalizer(
    client: &Client,
    obj: &DynamicObject,
    manager: &str,
    finalizer: &str,
    hold: bool,
) -> Result<(), KubeError> {
    let mut meta = identity(obj);
    if hold {
        meta["finalizers"] = serde_json::json!([finalizer]);
    }
    let patch = serde_json::json!({
        "apiVersion": TunnelEndpoint::api_version(&()),
        "kind": TunnelEndpoint::kind(&()),
        "metadata": meta,
    });
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &tep_resource())
        .patch(&name, &PatchParams::apply(manager), &Patch::Apply(patch))
        .await
        .map_err(api(format!(
            "{} finalizer {finalizer} on TunnelEndpoint {ns}/{name}",
            if hold { "adding" } else { "dropping" }
        )))?;
    Ok(())
}

/// Makes `manager` hold `finalizer` on every TunnelEndpoint of `objs` (read as `teps`) not being
/// deleted that it does not hold yet, before anything of it is rendered (so that its deletion
/// waits for the daemon). One whose hold fails is taken out of `peerings` (rendered once held);
/// returns the first failure.
pub async fn hold_first(
    client: &Client,
    objs: &[DynamicObject],
    teps: &[Tep],
    peerings: &mut liqo_peering::Peerings,
    manager: &str,
    finalizer: &str,
) -> Option<KubeError> {
    let mut first = None;
    for (obj, t) in objs.iter().zip(teps) {
        if t.deleting || owns_finalizer(&obj.metadata, manager, finalizer) {
            continue;
        }
        if let Err(e) = hold_finalizer(client, obj, manager, finalizer, true).await {
            tracing::warn!(tep = %t.key(), error = %liqo_types::chain(&e), "holding the finalizer; not rendered yet");
            if let Ok(p) = &t.parsed {
                peerings.remove(&p.peer);
            }
            first.get_or_insert(e);
        }
    }
    first
}

/// Applies `status` (the fields `manager` owns) to the TunnelEndpoint's status.
pub async fn apply_status(
    client: &Client,
    obj: &DynamicObject,
    manager: &str,
    status: serde_json::Value,
) -> Result<(), KubeError> {
    let patch = serde_json::json!({
        "apiVersion": TunnelEndpoint::api_version(&()),
        "kind": TunnelEndpoint::kind(&()),
        "metadata": identity(obj),
        "status": status,
    });
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &tep_resource())
        .patch_status(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(patch),
        )
        .await
        .map_err(api(format!(
            "writing the status of TunnelEndpoint {ns}/{name}"
        )))?;
    Ok(())
}

/// The addresses of the endpoint names the TunnelEndpoints give (an IPv4 address each; a name
/// that does not resolve is absent).
pub async fn resolve(teps: &[Tep]) -> BTreeMap<(String, u16), SocketAddr> {
    let mut out = BTreeMap::new();
    for t in teps {
        if let Ok(p) = &t.parsed
            && let Endpoint::Name(host, port) = &p.endpoint
            && !out.contains_key(&(host.clone(), *port))
        {
            match tokio::net::lookup_host((host.as_str(), *port)).await {
                Ok(addrs) => {
                    if let Some(a) = addrs.into_iter().find(SocketAddr::is_ipv4) {
                        out.insert((host.clone(), *port), a);
                    }
                }
                Err(e) => tracing::warn!(tep = %t.key(), %host, error = %e, "endpoint name"),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finalizer_is_owned_by_the_manager_that_applied_it() {
        let meta: ObjectMeta = serde_json::from_value(serde_json::json!({
            "finalizers": ["net.liqo.io/route-operator", "x"],
            "managedFields": [
                {"manager": "liqo-route-operator/n0", "operation": "Apply",
                 "apiVersion": "net.liqo.io/v1alpha1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:finalizers":
                    {"v:\"net.liqo.io/route-operator\"": {}}}}},
                {"manager": "liqo-gateway-operator", "operation": "Apply",
                 "subresource": "status", "apiVersion": "net.liqo.io/v1alpha1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
                {"manager": "kubectl", "operation": "Update",
                 "apiVersion": "net.liqo.io/v1alpha1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:finalizers": {"v:\"x\"": {}}}}},
            ],
        }))
        .unwrap();
        let f = net::ROUTE_FINALIZER;
        assert!(owns_finalizer(&meta, "liqo-route-operator/n0", f));
        assert!(!owns_finalizer(&meta, "liqo-route-operator/n1", f));
        assert!(!owns_finalizer(&meta, "liqo-gateway-operator", f));
        assert!(
            !owns_finalizer(&meta, "kubectl", "x"),
            "an update is no hold"
        );
        assert!(!owns_finalizer(&ObjectMeta::default(), "m", f));
        let dead = dead_holds(&meta, f, "liqo-route-operator/", &["n1".into()]);
        assert_eq!(dead, [(0, "liqo-route-operator/n0".to_owned())]);
        assert!(dead_holds(&meta, f, "liqo-route-operator/", &["n0".into()]).is_empty());
        assert!(dead_holds(&meta, "x", "liqo-route-operator/", &[]).is_empty());
    }
}

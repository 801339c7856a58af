//! What the cluster's network gives the chart's pods, for processes of the harness: the
//! Services' names and ports mapped to the loopback ports of the processes behind them, the
//! webhook configurations pointed at the controller-manager's loopback address, and the status
//! a cloud load balancer writes.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::Service},
    apimachinery::pkg::util::intstr::IntOrString,
};
use kube::{
    Api, Client,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    },
};

use super::{
    NAMESPACE, plumb,
    pod::{containers, name_of},
};
use crate::{k8s::Cluster, liqo::error::LiqoError};

/// Every name and port of the Services in front of `wanted`, with the loopback port of the
/// container port behind it.
pub(super) async fn service_ports(
    client: &Client,
    wanted: &[Deployment],
    ports: &BTreeMap<(String, u16), u16>,
) -> Result<BTreeMap<(String, u16), u16>, LiqoError> {
    let svcs = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_err(LiqoError::kube(format!(
            "listing the Services of {NAMESPACE}"
        )))?;
    let mut out = BTreeMap::new();
    for svc in svcs.items {
        let Some(spec) = svc.spec.as_ref() else {
            continue;
        };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let behind = wanted.iter().find(|d| {
            let labels = d
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref());
            labels.is_some_and(|l| selector.iter().all(|(k, v)| l.get(k) == Some(v)))
        });
        let Some(d) = behind else { continue };
        for sp in spec.ports.iter().flatten() {
            let target = containers(d)
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| match &sp.target_port {
                    Some(IntOrString::String(n)) => p.name.as_deref() == Some(n),
                    Some(IntOrString::Int(n)) => p.container_port == *n,
                    None => p.container_port == sp.port,
                });
            let Some(local) = target
                .and_then(|p| u16::try_from(p.container_port).ok())
                .and_then(|p| ports.get(&(name_of(d), p)))
            else {
                continue;
            };
            let port = u16::try_from(sp.port).unwrap_or(0);
            for n in plumb::service_names(&svc.metadata.name.clone().unwrap_or_default(), NAMESPACE)
            {
                out.insert((n, port), *local);
            }
        }
    }
    Ok(out)
}

/// The webhook configurations call the controller-manager at `https://127.0.0.1:<port>`
/// (the API server has no route to a Service of the harness): rewritten as the kit's install
/// rewrites the chart's files ([`crate::liqo::webhooks::Webhooks`]), their caBundle and
/// failurePolicy kept.
pub(super) async fn webhooks(client: &Client, port: u16) -> Result<(), LiqoError> {
    let name = control::consts::webhook::CONFIGURATION;
    let hooks = crate::liqo::webhooks::Webhooks {
        port,
        pod_failure_policy: None,
    };
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ));
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut obj = api
            .get(name)
            .await
            .map_err(LiqoError::kube(format!("reading {kind} {name}")))?;
        hooks.rewrite(kind, &mut obj);
        obj.metadata.managed_fields = None;
        api.replace(name, &PostParams::default(), &obj)
            .await
            .map_err(LiqoError::kube(format!(
                "pointing {kind} {name} at 127.0.0.1"
            )))?;
    }
    Ok(())
}

/// The status a cloud load balancer writes on every LoadBalancer Service of the namespace:
/// ingress 127.0.0.1 for `liqo-auth` (the peer's processes reach it there), an address of
/// TEST-NET-1 for the others (the gateway's: a peer's endpoint must be an address it can send
/// to, never loopback, and the harness's nodes say 127.0.0.1; no packet goes there on kwok's
/// nodes), one per cluster (from its API server's port).
pub(super) async fn load_balancers(c: &Cluster, client: &Client) -> Result<(), LiqoError> {
    let api = Api::<Service>::namespaced(client.clone(), NAMESPACE);
    let svcs = api
        .list(&ListParams::default())
        .await
        .map_err(LiqoError::kube(format!(
            "listing the Services of {NAMESPACE}"
        )))?;
    let port: u32 = c
        .server
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let node_ip = format!("192.0.2.{}", 1 + port % 254);
    for svc in svcs.items {
        let kind = svc.spec.as_ref().and_then(|s| s.type_.as_deref());
        if kind != Some("LoadBalancer") {
            continue;
        }
        let name = svc.metadata.name.unwrap_or_default();
        let ip = if name == control::consts::objects::AUTH_SERVICE {
            "127.0.0.1"
        } else {
            node_ip.as_str()
        };
        let status = serde_json::json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(LiqoError::kube(format!(
                "writing the load-balancer status of {name}"
            )))?;
    }
    Ok(())
}

//! What the network manager's harness tests share: keys, ports, the out-of-band peering, the
//! TunnelEndpoint helpers.

use control::{
    api::{discovery::ForeignCluster, net::TunnelEndpoint},
    consts::labels,
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::ApiResource,
};
use liqo_auth::tokens;
use serde_json::{Value, json};

use super::{MILAN_ID, Side};

pub(crate) const ROME_KEY: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
pub(crate) const MILAN_KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
pub(crate) const ROME_PORT: u16 = 51820;
pub(crate) const MILAN_PORT: u16 = 51821;

pub(crate) fn init_log() {
    // Another test of this binary may have installed it: then that one is used.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// What `liqoctl peer out-of-band milan` writes on rome.
pub(crate) async fn peer(rome: &Side, milan: &Side) {
    let milan_token = tokens::local_token(&milan.client, "liqo").await.unwrap();
    tokens::write_remote_token(
        &rome.client,
        "liqo",
        &MILAN_ID.parse().unwrap(),
        &milan_token,
    )
    .await
    .unwrap();
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "milan", "labels": {labels::CLUSTER_ID: MILAN_ID}},
        "spec": {
            "clusterIdentity": {"clusterID": MILAN_ID, "clusterName": "milan"},
            "foreignAuthUrl": milan.url,
            "outgoingPeeringEnabled": "Yes",
            "incomingPeeringEnabled": "Auto",
            "insecureSkipTLSVerify": true,
        },
    }))
    .unwrap();
    Api::<ForeignCluster>::all(rome.client.clone())
        .create(&PostParams::default(), &fc)
        .await
        .unwrap();
}

pub(crate) async fn tep(c: &Client, ns: &str, name: &str) -> Result<TunnelEndpoint, String> {
    Api::<TunnelEndpoint>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no TunnelEndpoint {ns}/{name}"))
}

pub(crate) async fn set_connection(c: &Client, ns: &str, name: &str, connection: Value) {
    Api::<TunnelEndpoint>::namespaced(c.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"connection": connection}})),
        )
        .await
        .unwrap();
}

pub(crate) async fn count<K>(c: &Client) -> usize
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    // Raw objects: a peer's bad value must not fail the count.
    let ar = ApiResource::erase::<K>(&());
    Api::<DynamicObject>::all_with(c.clone(), &ar)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

/// A Warning Event with `reason` about the object `name` (any namespace when `ns` is `None`)
/// whose note passes `note`.
pub(crate) async fn warning_event(
    c: &Client,
    ns: Option<&str>,
    reason: &str,
    name: &str,
    note: impl Fn(&str) -> bool,
) -> Result<(), String> {
    use k8s_openapi::api::events::v1::Event;
    let api = match ns {
        Some(ns) => Api::<Event>::namespaced(c.clone(), ns),
        None => Api::<Event>::all(c.clone()),
    };
    let events = api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    events
        .items
        .iter()
        .find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.note.as_deref().is_some_and(&note)
        })
        .map(drop)
        .ok_or_else(|| format!("no Warning Event {reason} about {name}"))
}

/// NETWORKING of a ForeignCluster.
pub(crate) async fn network_condition(
    c: &kube::Client,
    fc: &str,
) -> Result<control::api::discovery::PeeringCondition, String> {
    let fc = Api::<control::api::discovery::ForeignCluster>::all(c.clone())
        .get(fc)
        .await
        .map_err(|e| e.to_string())?;
    Ok(fc
        .status
        .unwrap_or_default()
        .peering_conditions
        .into_iter()
        .find(|c| c.type_ == control::api::discovery::PeeringConditionType::NetworkStatus)
        .ok_or("no NetworkStatus")?)
}

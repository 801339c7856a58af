//! Sweeping a cluster back to a listing: every API object whose UID the listing does not hold
//! is deleted (finalizers stripped, at once), until a listing shows none. The shared clusters'
//! cleanup ([`super::shared`]).

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
    discovery::{ApiCapabilities, ApiResource, Discovery, Scope, verbs},
};

use super::error::K8sError;

/// The label of the APIServices the API server manages itself.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The UIDs of every object `client` can list (see [`resources`]).
pub(crate) async fn uids(client: &Client) -> Result<HashSet<String>, K8sError> {
    let all = resources(client).await?;
    Ok(everything(client, &all)
        .await?
        .into_iter()
        .map(|o| o.uid)
        .collect())
}

/// Deletes every object whose UID `kept` does not hold (admission webhooks and API services
/// first: a webhook whose server is gone would refuse the rest; namespaces last, once emptied)
/// until a listing shows none, for at most `within`. A failed call is retried in the next round;
/// what is still there at the end is the error, with the last failure. `cluster` names it.
pub(crate) async fn sweep(
    client: &Client,
    cluster: &str,
    kept: &HashSet<String>,
    within: Duration,
) -> Result<(), K8sError> {
    let deadline = Instant::now() + within;
    let all = resources(client).await?;
    // Each round lists only the resources that still held something (a listing of everything
    // is some sixty requests); when none does, a listing of everything confirms it.
    let mut hot: Vec<(ApiResource, ApiCapabilities)> = Vec::new();
    let mut failed: Option<String> = None;
    loop {
        let scope = if hot.is_empty() { &all } else { &hot };
        let made: Vec<Object> = match everything(client, scope).await {
            Ok(found) => found
                .into_iter()
                .filter(|o| !kept.contains(&o.uid))
                .collect(),
            Err(e) => {
                failed = Some(liqo_types::chain(&e).to_string());
                // Unknown: list everything again next round.
                hot.clear();
                if Instant::now() > deadline {
                    return Err(K8sError::Leftovers {
                        cluster: cluster.to_owned(),
                        secs: within.as_secs(),
                        left: "(the listing failed)".into(),
                        failed,
                    });
                }
                tokio::time::sleep(ROUND).await;
                continue;
            }
        };
        if made.is_empty() {
            if hot.is_empty() {
                return Ok(());
            }
            hot.clear();
            continue;
        }
        if Instant::now() > deadline {
            let names: Vec<String> = made.iter().take(10).map(describe).collect();
            return Err(K8sError::Leftovers {
                cluster: cluster.to_owned(),
                secs: within.as_secs(),
                left: format!("{} objects: {}", made.len(), names.join(", ")),
                failed,
            });
        }
        let mut made = made;
        made.sort_by_key(rank);
        for o in &made {
            if let Err(e) = remove(client, o).await {
                failed = Some(liqo_types::chain(&e).to_string());
            }
        }
        hot = all
            .iter()
            .filter(|(r, _)| made.iter().any(|o| o.resource == *r))
            .cloned()
            .collect();
        tokio::time::sleep(ROUND).await;
    }
}

/// Between two rounds of a sweep.
const ROUND: Duration = Duration::from_millis(300);

/// Every resource that can be listed and deleted, except Events of the `events.k8s.io` group
/// (the same objects as the core ones) and CRDs (kept).
async fn resources(client: &Client) -> Result<Vec<(ApiResource, ApiCapabilities)>, K8sError> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(K8sError::kube("discovering the API"))?;
    Ok(discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(r, caps)| !kept_apart(r, caps))
        .collect())
}

/// Every object of `resources`, except the API server's own APIServices.
async fn everything(
    client: &Client,
    resources: &[(ApiResource, ApiCapabilities)],
) -> Result<Vec<Object>, K8sError> {
    let mut out = Vec::new();
    for (resource, caps) in resources {
        list(client, resource.clone(), caps, &mut out).await?;
    }
    Ok(out)
}

fn kept_apart(r: &ApiResource, caps: &ApiCapabilities) -> bool {
    !caps.supports_operation(verbs::LIST)
        || !caps.supports_operation(verbs::DELETE)
        || r.kind == "CustomResourceDefinition"
        || (r.group == "events.k8s.io" && r.kind == "Event")
}

/// One API object: where it is, and whether it holds finalizers or is going.
struct Object {
    resource: ApiResource,
    namespaced: bool,
    namespace: Option<String>,
    name: String,
    uid: String,
    finalizers: bool,
    deleting: bool,
}

async fn list(
    client: &Client,
    resource: ApiResource,
    caps: &ApiCapabilities,
    out: &mut Vec<Object>,
) -> Result<(), K8sError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let items = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(K8sError::kube(format!("listing {}", resource.plural)))?
        .items;
    let namespaced = caps.scope == Scope::Namespaced;
    for o in items {
        let m = o.metadata;
        // The API server's own APIServices, one per group it serves (CRDs' groups included):
        // it makes them again as long as the group is served.
        if m.labels
            .as_ref()
            .is_some_and(|l| l.contains_key(AUTOMANAGED))
        {
            continue;
        }
        out.push(Object {
            resource: resource.clone(),
            namespaced,
            namespace: m.namespace,
            name: m.name.unwrap_or_default(),
            uid: m.uid.unwrap_or_default(),
            finalizers: m.finalizers.is_some_and(|f| !f.is_empty()),
            deleting: m.deletion_timestamp.is_some(),
        });
    }
    Ok(())
}

fn rank(o: &Object) -> u8 {
    match (o.resource.kind.as_str(), o.namespaced) {
        ("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" | "APIService", _) => 0,
        ("Namespace", _) => 3,
        (_, true) => 1,
        (_, false) => 2,
    }
}

fn describe(o: &Object) -> String {
    match &o.namespace {
        Some(ns) => format!("{} {ns}/{}", o.resource.kind, o.name),
        None => format!("{} {}", o.resource.kind, o.name),
    }
}

/// Strips its finalizers (the controllers that would remove them are gone) and deletes it at
/// once (grace 0: a pod on a node without a kubelet would wait for the pod garbage collector).
/// An object already gone is fine.
async fn remove(client: &Client, o: &Object) -> Result<(), K8sError> {
    let api: Api<DynamicObject> = match (&o.namespace, o.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &o.resource),
        _ => Api::all_with(client.clone(), &o.resource),
    };
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
    if o.finalizers {
        let strip = serde_json::json!({"metadata": {"finalizers": null}});
        if let Err(e) = api
            .patch(&o.name, &PatchParams::default(), &Patch::Merge(&strip))
            .await
            && !gone(&e)
        {
            return Err(K8sError::Kube {
                what: format!("removing the finalizers of {}", describe(o)),
                source: e,
            });
        }
    }
    // A pod already terminating is deleted again with grace 0: on a node whose kubelet is
    // gone (a virtual node) it would wait for the pod garbage collector.
    if o.deleting && o.resource.kind != "Pod" {
        return Ok(());
    }
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::background()
    };
    match api.delete(&o.name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) if gone(&e) => Ok(()),
        Err(e) => Err(K8sError::Kube {
            what: format!("deleting {}", describe(o)),
            source: e,
        }),
    }
}

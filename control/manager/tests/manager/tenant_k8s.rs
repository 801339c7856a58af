//! A real cluster (milan, the test kit's harness) running these controllers in-process: a
//! ForeignCluster whose tenant namespace is still terminating (an earlier peering's, deleted
//! by an unpeer; here held by a finalizer) names no tenant namespace, since nothing can be made
//! in it; once the old namespace is gone the controller makes it again and names it.

use crate::common;

use common::*;

use std::time::Duration;

use control::{
    api::discovery::{ForeignCluster, PeeringConditionType as T},
    consts::{labels, values},
    names,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use testkit::k8s;

/// The finalizer that holds the old tenant namespace in `Terminating`.
const HOLD: &str = "test.liqo.io/hold";

/// The tenant namespace `fc` names, if any.
fn named(fc: &ForeignCluster) -> Option<String> {
    fc.status
        .as_ref()
        .and_then(|s| s.tenant_namespace.as_ref())
        .and_then(|t| t.local.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_terminating_tenant_namespace_is_named_only_once_made_again() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let milan = start(&set.clusters[0], &identity(MILAN_ID, "milan")).await;

    // Rome's tenant namespace from an earlier peering, deleted and held terminating.
    let rome = identity(ROME_ID, "rome");
    let tenant = names::tenant_namespace(&rome).to_string();
    let namespaces = Api::<Namespace>::all(milan.client.clone());
    let old: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": tenant, "finalizers": [HOLD], "labels": {
            labels::TENANT_NAMESPACE: values::TRUE,
            labels::CLUSTER_ID: ROME_ID,
        }},
    }))
    .unwrap();
    let old = namespaces
        .create(&PostParams::default(), &old)
        .await
        .unwrap();
    namespaces
        .delete(&tenant, &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get(&tenant).await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());

    // A ForeignCluster for rome (its auth URL takes connections and never answers).
    let rome_auth = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", rome_auth.local_addr().unwrap());
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "rome"},
        "spec": {
            "clusterIdentity": {"clusterID": ROME_ID, "clusterName": "rome"},
            "outgoingPeeringEnabled": "No",
            "foreignAuthUrl": url,
        },
    }))
    .unwrap();
    let fcs = Api::<ForeignCluster>::all(milan.client.clone());
    fcs.create(&PostParams::default(), &fc).await.unwrap();

    // Reconciled (processed), yet no tenant namespace named while the old one terminates.
    eventually(20, "rome's ForeignCluster processed", || {
        let fcs = fcs.clone();
        async move {
            let fc = fcs.get("rome").await.map_err(|e| e.to_string())?;
            let process = condition(&fc, T::ProcessForeignClusterStatus);
            (process != Default::default())
                .then_some(())
                .ok_or_else(|| format!("process condition {process:?}"))
        }
    })
    .await;
    for _ in 0..6 {
        let fc = fcs.get("rome").await.unwrap();
        assert_eq!(named(&fc), None, "a terminating namespace named");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The old namespace goes: the controller makes it again and names it.
    namespaces
        .patch(
            &tenant,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually(30, "rome's tenant namespace made again and named", || {
        let (fcs, namespaces, tenant) = (fcs.clone(), namespaces.clone(), tenant.clone());
        async move {
            let fc = fcs.get("rome").await.map_err(|e| e.to_string())?;
            if named(&fc).as_deref() != Some(tenant.as_str()) {
                return Err(format!("named {:?}", named(&fc)));
            }
            let ns = namespaces.get(&tenant).await.map_err(|e| e.to_string())?;
            (ns.metadata.deletion_timestamp.is_none())
                .then_some(())
                .ok_or_else(|| "the namespace named is the terminating one".to_string())
        }
    })
    .await;
    let made = namespaces.get(&tenant).await.unwrap();
    assert_ne!(made.metadata.uid, old.metadata.uid, "a new namespace");
    assert_eq!(
        made.metadata
            .labels
            .unwrap_or_default()
            .get(labels::CLUSTER_ID)
            .map(String::as_str),
        Some(ROME_ID)
    );

    // Closed before stopping: the controllers' requests to rome's auth URL end with a reset.
    drop(rome_auth);
    milan.stop().await;
    set.release().await.unwrap();
}

//! A real cluster (milan, the test kit's harness) running liqo-auth's server and these controllers
//! in-process: ResourceRequests that look replicated but were written by hand in rome's tenant
//! namespace naming a third cluster (naples) are ignored: no ForeignCluster, no tenant
//! namespace, nothing sent to their auth URL, the request itself untouched. A request that
//! does come from rome, in the same namespace, is served (so the controller did run).

use crate::common;

use common::*;

use std::time::Duration;

use control::{
    api::discovery::{ForeignCluster, ResourceRequest},
    consts::{labels, values},
    names,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use testkit::k8s;

fn request(
    name: &str,
    ns: &str,
    origin: &str,
    id: &str,
    cluster: &str,
    url: &str,
) -> ResourceRequest {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ResourceRequest",
        "metadata": {"name": name, "namespace": ns, "labels": {
            labels::REPLICATED: values::TRUE,
            labels::ORIGIN_ID: origin,
        }},
        "spec": {
            "clusterIdentity": {"clusterID": id, "clusterName": cluster},
            "authUrl": url,
        },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_naming_another_cluster_is_ignored() {
    // Another test of this binary may have installed it: then that one is used.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let milan = start(&set.clusters[0], &identity(MILAN_ID, "milan")).await;

    // Rome's tenant namespace at milan, as liqo-auth makes it.
    let rome_id = identity(ROME_ID, "rome");
    let tenant = names::tenant_namespace(&rome_id).to_string();
    let namespace: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": tenant, "labels": {
            labels::TENANT_NAMESPACE: values::TRUE,
            labels::CLUSTER_ID: ROME_ID,
        }},
    }))
    .unwrap();
    Api::<Namespace>::all(milan.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    // Where naples' and rome's auth servers would be: nothing may reach naples'.
    let naples_auth = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let naples_url = format!("https://{}", naples_auth.local_addr().unwrap());
    let rome_auth = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rome_url = format!("https://{}", rome_auth.local_addr().unwrap());

    let rrs = Api::<ResourceRequest>::namespaced(milan.client.clone(), &tenant);
    // Spec names naples, origin rome; then both naples.
    for rr in [
        request(
            "forged-spec",
            &tenant,
            ROME_ID,
            NAPLES_ID,
            "naples",
            &naples_url,
        ),
        request(
            "forged-origin",
            &tenant,
            NAPLES_ID,
            NAPLES_ID,
            "naples",
            &naples_url,
        ),
    ] {
        rrs.create(&PostParams::default(), &rr).await.unwrap();
    }
    // Rome's own request, made after: once it is served, the forged ones were seen.
    rrs.create(
        &PostParams::default(),
        &request("rome", &tenant, ROME_ID, ROME_ID, "rome", &rome_url),
    )
    .await
    .unwrap();

    let fcs = Api::<ForeignCluster>::all(milan.client.clone());
    eventually(20, "milan's incoming ForeignCluster for rome", || {
        let fcs = fcs.clone();
        async move {
            let all = fcs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            all.items
                .iter()
                .any(|f| f.spec.cluster_identity.cluster_id.as_str() == ROME_ID)
                .then_some(())
                .ok_or_else(|| "none yet".to_string())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    let all = fcs.list(&ListParams::default()).await.unwrap();
    let ids: Vec<&str> = all
        .items
        .iter()
        .map(|f| f.spec.cluster_identity.cluster_id.as_str())
        .collect();
    assert_eq!(ids, [ROME_ID], "only rome's ForeignCluster");
    let naples_ns = Api::<Namespace>::all(milan.client.clone())
        .list(&ListParams::default().labels(&format!("{}={NAPLES_ID}", labels::CLUSTER_ID)))
        .await
        .unwrap();
    assert!(naples_ns.items.is_empty(), "no tenant namespace for naples");
    let naples_tenant = names::tenant_namespace(&identity(NAPLES_ID, "naples")).to_string();
    assert!(
        Api::<Namespace>::all(milan.client.clone())
            .get_opt(&naples_tenant)
            .await
            .unwrap()
            .is_none()
    );
    for name in ["forged-spec", "forged-origin"] {
        let rr = rrs.get(name).await.unwrap();
        assert!(
            rr.metadata.owner_references.unwrap_or_default().is_empty(),
            "{name} got an owner"
        );
        assert!(rr.status.is_none(), "{name} got a status");
    }
    let rome = rrs.get("rome").await.unwrap();
    assert!(
        !rome
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    // Nothing connected to naples' auth URL.
    let accepted = tokio::time::timeout(Duration::from_millis(200), naples_auth.accept()).await;
    assert!(accepted.is_err(), "something connected to naples' auth URL");
    // Closed before stopping: the controllers' requests to rome's auth URL, never answered,
    // end with a reset instead of holding the shutdown.
    drop((naples_auth, rome_auth));
    milan.stop().await;
    set.release().await.unwrap();
}

//! The manual's chapter 14 ("Offloading a Service") on the lab: an application (Deployment and
//! Service) in rome, its namespace offloaded to milan with `EnforceSameName` and `Local` pods
//! by the manual's `liqoctl offload namespace` line; then the Service on milan with its own
//! ClusterIP, no pod there, and its EndpointSlices holding rome's pods at milan's view of
//! them, each address the answer of rome's `liqo-ipam map-ip --direction endpoint`.

use std::collections::BTreeSet;

use dataplane::netns::Netns;
use e2e::lab::k8s::K8sLab;
use k8s_openapi::api::{
    core::v1::{Namespace, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{run, until};

/// The application's namespace (the manual's is `liqo-demo`, offloaded here with `Remote`
/// pods already).
pub(crate) const SVC_NS: &str = "liqo-demo-svc";
const SERVICE: &str = "flights-service";

/// rome's IPAM's answer for `ip` exposed to `peer` (`liqo-ipam map-ip`, in rome's node).
pub(crate) fn map_ip(k: &K8sLab, peer: &str, ip: &str) -> String {
    let c = k.lab.topology.cluster("rome").unwrap();
    let ns = Netns::open(&k.lab.node_netns("rome", c.nodes[0].name.as_str())).unwrap();
    let out = ns
        .command(e2e::lab::bin("liqo-ipam").unwrap())
        .args([
            "map-ip",
            "--peer",
            peer,
            "--ip",
            ip,
            "--direction",
            "endpoint",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "liqo-ipam map-ip {ip}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `<ip>` or `<ip> (external <ip>)`.
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The addresses of the reflected copies of `service`'s EndpointSlices on `c` (in `SVC_NS`).
pub(crate) async fn copied_addresses(
    c: &Client,
    service: &str,
) -> Result<BTreeSet<String>, String> {
    let slices = Api::<EndpointSlice>::namespaced(c.clone(), SVC_NS)
        .list(&ListParams::default().labels(&format!(
            "kubernetes.io/service-name={service},endpointslice.kubernetes.io/managed-by=endpointslice.reflection.liqo.io"
        )))
        .await
        .map_err(|e| e.to_string())?;
    Ok(slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect())
}

/// Chapter 14 on `k`; returns how long the Service took to appear on milan.
pub(crate) async fn offload_a_service(
    k: &K8sLab,
    rome: &Client,
    milan: &Client,
    milan_id: &str,
) -> f64 {
    Api::<Namespace>::all(rome.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": SVC_NS}})).unwrap(),
        )
        .await
        .unwrap();
    let app = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "flights-service", "namespace": SVC_NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"run": SERVICE}},
            "template": {"metadata": {"labels": {"run": SERVICE}},
                "spec": {"containers": [{"name": "flights", "image": "flights:latest",
                    "ports": [{"containerPort": 7999}],
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}}
    });
    let pp = PatchParams::apply("offload-test").force();
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(rome.clone(), SVC_NS)
        .patch(SERVICE, &pp, &Patch::Apply(&app))
        .await
        .unwrap();
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": SVC_NS},
        "spec": {"selector": {"run": SERVICE}, "ports": [{"port": 7999, "targetPort": 7999}]}
    });
    Api::<Service>::namespaced(rome.clone(), SVC_NS)
        .patch(SERVICE, &pp, &Patch::Apply(&svc))
        .await
        .unwrap();
    let t = std::time::Instant::now();
    run(
        k,
        "liqoctl",
        "rome",
        &[
            "offload",
            "namespace",
            SVC_NS,
            "--namespace-mapping-strategy",
            "EnforceSameName",
            "--pod-offloading-strategy",
            "Local",
        ],
    );
    let remote = until(120, "flights-service on milan", || {
        let api = Api::<Service>::namespaced(milan.clone(), SVC_NS);
        async move { api.get(SERVICE).await.map_err(|e| e.to_string()) }
    })
    .await;
    let took = t.elapsed().as_secs_f64();
    let home = Api::<Service>::namespaced(rome.clone(), SVC_NS)
        .get(SERVICE)
        .await
        .unwrap();
    let ip = |s: &Service| s.spec.as_ref().and_then(|s| s.cluster_ip.clone());
    assert!(
        ip(&remote).is_some() && ip(&remote) != ip(&home),
        "its own ClusterIP"
    );

    // rome's pods, Running locally (kwok) with their IPs.
    let home_ips: BTreeSet<String> = until(120, "2 flights pods Running in rome", || {
        let api = Api::<Pod>::namespaced(rome.clone(), SVC_NS);
        async move {
            let pods = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let ips: BTreeSet<String> = pods
                .items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
                .collect();
            (ips.len() == 2)
                .then_some(ips)
                .ok_or(format!("{} pods", pods.items.len()))
        }
    })
    .await;
    let expect: BTreeSet<String> = home_ips.iter().map(|ip| map_ip(k, milan_id, ip)).collect();
    let got = until(120, "milan's EndpointSlices hold rome's pods", || {
        let expect = expect.clone();
        async move {
            let got = copied_addresses(milan, SERVICE).await?;
            (got == expect)
                .then_some(got.clone())
                .ok_or(format!("{got:?} (want {expect:?})"))
        }
    })
    .await;
    assert!(
        got.is_disjoint(&home_ips),
        "remapped: {got:?} vs {home_ips:?}"
    );
    // milan's own EndpointSlice of the Service copy (its controller copies the copy's labels,
    // ours among them) is milan's: never deleted as a copy without a source.
    let native = || async {
        let mut uids: Vec<String> = Api::<EndpointSlice>::namespaced(milan.clone(), SVC_NS)
            .list(&ListParams::default().labels(&format!(
                "kubernetes.io/service-name={SERVICE},endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"
            )))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|s| s.metadata.uid)
            .collect();
        uids.sort();
        uids
    };
    let first = until(60, "milan's own slice of flights-service", || async {
        let uids = native().await;
        (!uids.is_empty()).then_some(uids).ok_or("none".to_owned())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(native().await, first, "milan's own slice kept");
    let remote_pods = Api::<Pod>::namespaced(milan.clone(), SVC_NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(remote_pods.items.is_empty(), "no application pod on milan");
    println!("CH14 rome pods {home_ips:?} are {got:?} on milan");
    took
}

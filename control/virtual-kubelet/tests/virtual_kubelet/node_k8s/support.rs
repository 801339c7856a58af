//! What node_k8s uses: the clusters and the node loop stopped on drop, a stopped process
//! resumed on drop, the offer and the tunnel written as admin, the node's and the Lease's
//! checks.

use std::time::{Duration, Instant};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use liqo_virtual_kubelet::node;
use serde_json::{Value, json};
use testkit::k8s;

pub(crate) const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
pub(crate) const TENANT: &str = "liqo-tenant-milan";
pub(crate) const NODE: &str = "liqo-milan";
pub(crate) const INTERVAL: Duration = Duration::from_secs(3);

/// Tears the clusters down even when the test fails.
pub(crate) struct DownOnDrop(pub(crate) testkit::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Best effort in a destructor: a failure here cannot be reported better than the
        // test's own.
        let _ = k8s::down(&self.0);
    }
}

/// Resumes a process stopped by SIGSTOP, even when the test fails.
pub(crate) struct Frozen(pub(crate) u32);

pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

pub(crate) async fn eventually<F, Fut, T>(secs: u64, what: &str, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(_) => return started.elapsed(),
            Err(e) if Instant::now() > deadline => panic!("{what} after {secs} s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

pub(crate) async fn client_of(path: &std::path::Path, context: Option<&str>) -> kube::Config {
    let kc = Kubeconfig::read_from(path).unwrap();
    let opts = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .unwrap()
}

pub(crate) async fn apply(client: &Client, api_version: &str, kind: &str, plural: &str, v: Value) {
    let gvk = kube::api::GroupVersionKind::try_from(&kube::api::TypeMeta {
        api_version: api_version.into(),
        kind: kind.into(),
    })
    .unwrap();
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), TENANT, &ar);
    let name = v["metadata"]["name"].as_str().unwrap().to_owned();
    let mut v = v;
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    let params = PatchParams::apply("node-k8s-test").force();
    api.patch(&name, &params, &Patch::Apply(&v)).await.unwrap();
    if v.get("status").is_some() {
        api.patch_status(&name, &params, &Patch::Apply(&v))
            .await
            .unwrap();
    }
}

pub(crate) async fn offer(client: &Client, cpu: &str) {
    let v = json!({
        "metadata": {"name": "milan", "namespace": TENANT},
        "spec": {"clusterId": MILAN_ID,
            "resourceQuota": {"hard": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
            "labels": {"topology.liqo.io/region": "center"}},
    });
    apply(
        client,
        "sharing.liqo.io/v1alpha1",
        "ResourceOffer",
        "resourceoffers",
        v,
    )
    .await;
}

pub(crate) async fn tunnel(client: &Client, status: &str) {
    let v = json!({
        "metadata": {"name": "milan", "namespace": TENANT, "labels": {"clusterID": MILAN_ID}},
        "spec": {"clusterID": MILAN_ID, "localPodCIDR": "10.244.0.0/16",
            "localExternalCIDR": "10.201.0.0/16", "remotePodCIDR": "10.244.0.0/16",
            "remoteExternalCIDR": "10.201.0.0/16", "endpointIP": "127.0.0.1",
            "backendType": "wireguard", "backend_config": {}},
        "status": {"connection": {"status": status}},
    });
    apply(
        client,
        "net.liqo.io/v1alpha1",
        "TunnelEndpoint",
        "tunnelendpoints",
        v,
    )
    .await;
}

pub(crate) async fn get_node(client: &Client) -> Result<Node, String> {
    Api::<Node>::all(client.clone())
        .get_opt(NODE)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no node".to_owned())
}

/// (status, reason) of condition `t`.
pub(crate) fn condition(n: &Node, t: &str) -> (String, String) {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == t))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
        .unwrap_or_default()
}

pub(crate) fn has_taint(n: &Node, key: &str, effect: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key && t.effect == effect))
}

/// The node: shape, capacity `cpu`, Ready `ready`.
pub(crate) async fn node_is(
    client: &Client,
    cpu: &str,
    ready: &str,
    net: &str,
) -> Result<Node, String> {
    let n = get_node(client).await?;
    let labels = n.metadata.labels.clone().unwrap_or_default();
    for (k, v) in [
        ("liqo.io/type", "virtual-node"),
        ("liqo.io/remote-cluster-id", MILAN_ID),
        ("kubernetes.io/hostname", NODE),
        ("topology.liqo.io/region", "center"),
        ("example.com/extra", "yes"),
        ("storage.liqo.io/available", "false"),
    ] {
        if labels.get(k).map(String::as_str) != Some(v) {
            return Err(format!("label {k}: {labels:?}"));
        }
    }
    if !has_taint(&n, "virtual-node.liqo.io/not-allowed", "NoExecute") {
        return Err(format!("taints {:?}", n.spec));
    }
    let s = n.status.clone().unwrap_or_default();
    let cap = s.capacity.clone().unwrap_or_default();
    if cap.get("cpu").map(|q| q.0.as_str()) != Some(cpu) || s.allocatable != s.capacity {
        return Err(format!("capacity {cap:?}, allocatable {:?}", s.allocatable));
    }
    let addr = s.addresses.clone().unwrap_or_default();
    if addr.len() != 1 || addr[0].type_ != "InternalIP" || addr[0].address != "127.0.0.1" {
        return Err(format!("addresses {addr:?}"));
    }
    let port = s
        .daemon_endpoints
        .as_ref()
        .and_then(|d| d.kubelet_endpoint.as_ref());
    if port.map(|p| p.port) != Some(10250) {
        return Err(format!("port {port:?}"));
    }
    if condition(&n, "Ready").0 != ready || condition(&n, "NetworkUnavailable").0 != net {
        return Err(format!("conditions {:?}", s.conditions));
    }
    Ok(n)
}

pub(crate) async fn lease(client: &Client) -> Result<Lease, String> {
    Api::<Lease>::namespaced(client.clone(), node::LEASE_NAMESPACE)
        .get_opt(NODE)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no lease".to_owned())
}

pub(crate) fn renew_time(l: &Lease) -> Option<k8s_openapi::jiff::Timestamp> {
    l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

/// Aborts the node loop when the test ends, even on failure.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<Result<(), node::NodeError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

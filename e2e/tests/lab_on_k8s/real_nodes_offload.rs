//! The main job's offloaded pods on real nodes (Liqo's components as processes, the pods in
//! real containers), on the lab the quickstart left: the demo's pod on `liqo-milan` is a real
//! container on one of milan's nodes; `kubectl logs` and `exec` reach it through milan's
//! kubelet; an offloaded pod mounting a ConfigMap, a Secret and its ServiceAccount's token
//! starts on milan.

use std::time::{Duration, Instant};

use e2e::lab::k8s::{K8sLab, demo};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::{Api, Client, api::ListParams};
use serde_json::json;

const NS: &str = demo::NAMESPACE;
const IMAGE: &str = demo::IMAGE;

/// `kubectl` on `cluster`; panics on a failure.
fn run(k: &K8sLab, cluster: &str, args: &[&str]) -> String {
    crate::offload_lab::run(k, "kubectl", cluster, args)
}

async fn create<K>(api: Api<K>, v: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&Default::default(), &serde_json::from_value(v).unwrap())
        .await
        .unwrap();
}

/// Checks the demo the quickstart left on lab `k` (rome peered with milan, `liqo-demo`
/// offloaded, the demo's 4 replicas Ready).
pub(crate) async fn offloaded_demo(k: &K8sLab) {
    let rome = k.set.get("rome").unwrap().client().await.unwrap();
    let milan = k.set.get("milan").unwrap().client().await.unwrap();
    let pods = demo::ready_pods(&rome, 4, Duration::from_secs(30))
        .await
        .unwrap();
    let offloaded = pods
        .iter()
        .find(|p| demo::node_of(p) == "liqo-milan")
        .expect("a pod on liqo-milan");
    let name = offloaded.metadata.name.clone().unwrap();
    // On milan: a real container on one of milan's nodes.
    let remote = Api::<Pod>::namespaced(milan.clone(), &remote_ns(&milan).await)
        .get(&name)
        .await
        .unwrap();
    let cid = remote
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .unwrap()[0]
        .container_id
        .clone()
        .unwrap_or_default();
    assert!(cid.starts_with("containerd://"), "{cid}");
    assert!(
        ["n0", "n1"].contains(&demo::node_of(&remote).as_str()),
        "{}",
        demo::node_of(&remote)
    );

    // logs and exec reach the offloaded pod's container.
    let logs = run(k, "rome", &["logs", "-n", NS, &name]);
    assert!(logs.contains("serving"), "{logs}");
    let host = run(
        k,
        "rome",
        &["exec", "-n", NS, &name, "--", "cat", "/etc/hostname"],
    );
    assert_eq!(host.trim(), name);

    // An offloaded pod mounting a ConfigMap, a Secret and its token.
    create(
        Api::<ConfigMap>::namespaced(rome.clone(), NS),
        json!({"metadata": {"name": "cfg"}, "data": {"greeting": "ciao"}}),
    )
    .await;
    create(
        Api::<Secret>::namespaced(rome.clone(), NS),
        json!({"metadata": {"name": "sec"}, "stringData": {"password": "s3cret"}}),
    )
    .await;
    create(Api::<Pod>::namespaced(rome.clone(), NS), json!({
        "metadata": {"name": "mounts"},
        "spec": {"nodeSelector": {"liqo.io/type": "virtual-node"},
            "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"}],
            "containers": [{"name": "m", "image": IMAGE, "imagePullPolicy": "Never",
                "command": ["bash", "-c", "cat /cfg/greeting /sec/password; ls /var/run/secrets/kubernetes.io/serviceaccount; sleep infinity"],
                "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}, {"name": "sec", "mountPath": "/sec"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "sec", "secret": {"secretName": "sec"}}]}})).await;
    let api: Api<Pod> = Api::namespaced(rome.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(90);
    while api
        .get("mounts")
        .await
        .unwrap()
        .status
        .and_then(|s| s.phase)
        .is_none_or(|p| p != "Running")
    {
        assert!(Instant::now() < deadline, "the mounting pod Running");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = run(k, "rome", &["logs", "-n", NS, "mounts"]);
        if logs.contains("ciaos3cret") && logs.contains("token") {
            break;
        }
        assert!(Instant::now() < deadline, "the mounts' contents: {logs:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The namespace milan holds rome's offloaded pods in.
pub(crate) async fn remote_ns(milan: &Client) -> String {
    Api::<Namespace>::all(milan.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .find(|n| n.starts_with(&format!("{NS}-rome-")))
        .expect("the remote namespace")
}

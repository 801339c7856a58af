//! The main job on real nodes (Liqo's components as processes, the pods in real containers):
//! rome peers with milan by `liqoctl generate peer-command`, offloads `liqo-demo`, and a demo
//! Deployment spread over rome's two nodes and `liqo-milan` answers requests from a rome pod to
//! its Service, by ClusterIP and by DNS name, from both clusters (the offloaded pod through the
//! tunnel, seeing the client at milan's view of it); `kubectl logs` and `exec` reach the
//! offloaded pod's container on milan's kubelet; an offloaded pod mounting a ConfigMap, a
//! Secret and its ServiceAccount's token starts on milan.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use e2e::lab::k8s::K8sLab;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, Pod, Secret, Service},
};
use kube::{Api, Client, api::ListParams};
use serde_json::json;

const NS: &str = "liqo-demo";
const IMAGE: &str = "localhost/liqo-lab/liqo-demo:lab";

fn run(k: &K8sLab, cluster: &str, args: &[&str]) -> String {
    let out = k.tool("kubectl", cluster, args).unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?} on {cluster}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn create<K>(api: Api<K>, v: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&Default::default(), &serde_json::from_value(v).unwrap())
        .await
        .unwrap();
}

/// Whether a pod is Ready.
pub(crate) fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The demo's pods once `n` are Ready, none of them terminating.
async fn demo_pods(rome: &Client, n: usize) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(rome.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pods = api
            .list(&ListParams::default().labels("app=demo"))
            .await
            .unwrap()
            .items;
        let live: Vec<Pod> = pods
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if live.len() == n && live.iter().all(ready) {
            return live;
        }
        assert!(
            Instant::now() < deadline,
            "{n} demo pods Ready: {:?}",
            live.iter()
                .map(|p| (node_of(p), ready(p)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs the check on lab `k` (up with real nodes); returns the answers per pod.
pub(crate) async fn offload_demo(k: &K8sLab) -> BTreeMap<String, usize> {
    let rome = k.set.get("rome").unwrap().client().await.unwrap();
    let milan = k.set.get("milan").unwrap().client().await.unwrap();
    let t = Instant::now();
    k.peer("rome", "milan").unwrap();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(rome.clone());
    let deadline = Instant::now() + Duration::from_secs(120);
    while !nodes
        .get_opt("liqo-milan")
        .await
        .unwrap()
        .is_some_and(|n| e2e::lab::k8s::nodes::ready(&n))
    {
        assert!(Instant::now() < deadline, "liqo-milan Ready");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "TIMING real nodes: peering to liqo-milan Ready: {:.1} s",
        t.elapsed().as_secs_f64()
    );

    create(
        Api::<Namespace>::all(rome.clone()),
        json!({"metadata": {"name": NS}}),
    )
    .await;
    let out = k
        .tool("liqoctl", "rome", &["offload", "namespace", NS])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = json!([
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]);
    create(Api::<Deployment>::namespaced(rome.clone(), NS), json!({
        "metadata": {"name": "demo"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "demo"}},
            "template": {"metadata": {"labels": {"app": "demo"}}, "spec": {
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "demo"}}}],
                "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"}],
                "containers": [{"name": "demo", "image": IMAGE, "imagePullPolicy": "Never", "env": env,
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1}}]}}}})).await;
    create(
        Api::<Service>::namespaced(rome.clone(), NS),
        json!({
        "metadata": {"name": "demo"},
        "spec": {"selector": {"app": "demo"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    )
    .await;
    let t = Instant::now();
    let pods = demo_pods(&rome, 3).await;
    eprintln!(
        "TIMING real nodes: 3 demo pods Ready (one offloaded): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let offloaded = pods
        .iter()
        .find(|p| node_of(p) == "liqo-milan")
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
        ["n0", "n1"].contains(&node_of(&remote).as_str()),
        "{}",
        node_of(&remote)
    );

    // Requests from a rome pod on a real node, by ClusterIP and by name.
    let client = pods.iter().find(|p| node_of(p) != "liqo-milan").unwrap();
    let client_name = client.metadata.name.clone().unwrap();
    let ip = Api::<Service>::namespaced(rome.clone(), NS)
        .get("demo")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    // The offloaded pod's endpoint reaches kube-proxy a moment after the pod is Ready: wait
    // until it answers once (through the tunnel), then count.
    let once = format!(
        "exec 3<>/dev/tcp/{ip}/80 && printf 'GET /?format=text HTTP/1.0\\r\\n\\r\\n' >&3 && timeout 5 cat <&3 | tail -n1"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = k
            .tool(
                "kubectl",
                "rome",
                &["exec", "-n", NS, &client_name, "--", "bash", "-c", &once],
            )
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains(&format!("pod={name} ")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the offloaded pod {name} never answered through the Service"
        );
    }
    let script = format!(
        "for h in {ip} demo.{NS}.svc.cluster.local; do for i in $(seq 1 20); do \
         exec 3<>/dev/tcp/$h/80 || {{ echo FAIL; continue; }}; \
         printf 'GET /?format=text HTTP/1.0\\r\\n\\r\\n' >&3; timeout 5 cat <&3 | tail -n1; echo; exec 3<&-; done; done"
    );
    let out = run(
        k,
        "rome",
        &["exec", "-n", NS, &client_name, "--", "bash", "-c", &script],
    );
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let answers: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        answers.len(),
        40,
        "20 answers by ClusterIP, 20 by name: {out}"
    );
    let mut by_pod: BTreeMap<String, usize> = BTreeMap::new();
    for line in answers {
        let pod = line
            .split(' ')
            .find_map(|f| f.strip_prefix("pod="))
            .unwrap_or(line);
        assert!(
            names.iter().any(|n| n == pod),
            "an answer of a demo pod: {line:?}"
        );
        *by_pod.entry(pod.to_owned()).or_default() += 1;
    }
    assert!(
        by_pod.get(&name).is_some_and(|n| *n > 0),
        "the offloaded pod answered: {by_pod:?}"
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
    by_pod
}

/// The namespace milan holds rome's offloaded pods in.
async fn remote_ns(milan: &Client) -> String {
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

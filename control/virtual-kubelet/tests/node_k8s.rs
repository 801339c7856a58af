//! The virtual node on real apiservers (control-plane.md §2.2, §2.4, §2.7): two harness
//! clusters, rome (home) and milan (provider); the chart installed on rome without processes
//! (`e2e::liqo::install` with nothing started: CRDs, ClusterRoles, a token of ServiceAccount
//! `liqo-virtual-kubelet-local`), so `node::run` runs with exactly the chart's RBAC; the
//! ResourceOffer and the TunnelEndpoint written as admin. Checks the node's shape (labels,
//! taint, capacity = the offer, address, port, conditions), the Lease (renewed within the
//! interval), the offer and the tunnel followed, the Node re-created when deleted, milan's
//! apiserver stopped (SIGSTOP) ⇒ the Lease no longer renewed and kube-controller-manager
//! marking the node Unknown with the unreachable taint, resumed ⇒ Ready again; the drain and
//! the delete. Prints the timings it measures.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use control::api::discovery::ClusterIdentity;
use e2e::{
    k8s::{self, Clusters, Options},
    liqo,
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Namespace, Node, Pod},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use liqo_virtual_kubelet::{VkConfig, config::Remote, node};
use serde_json::{Value, json};

const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
const TENANT: &str = "liqo-tenant-milan";
const NODE: &str = "liqo-milan";
const INTERVAL: Duration = Duration::from_secs(3);

/// Tears the clusters down even when the test fails.
struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Best effort in a destructor: a failure here cannot be reported better than the
        // test's own.
        let _ = k8s::down(&self.0);
    }
}

/// Resumes a process stopped by SIGSTOP, even when the test fails.
struct Frozen(u32);

fn signal(pid: u32, sig: &str) {
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

async fn eventually<F, Fut, T>(secs: u64, what: &str, mut f: F) -> Duration
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

async fn client_of(path: &std::path::Path, context: Option<&str>) -> kube::Config {
    let kc = Kubeconfig::read_from(path).unwrap();
    let opts = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .unwrap()
}

async fn apply(client: &Client, api_version: &str, kind: &str, plural: &str, v: Value) {
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

async fn offer(client: &Client, cpu: &str) {
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

async fn tunnel(client: &Client, status: &str) {
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

async fn get_node(client: &Client) -> Result<Node, String> {
    Api::<Node>::all(client.clone())
        .get_opt(NODE)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no node".to_owned())
}

/// (status, reason) of condition `t`.
fn condition(n: &Node, t: &str) -> (String, String) {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == t))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
        .unwrap_or_default()
}

fn has_taint(n: &Node, key: &str, effect: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key && t.effect == effect))
}

/// The node: shape, capacity `cpu`, Ready `ready`.
async fn node_is(client: &Client, cpu: &str, ready: &str, net: &str) -> Result<Node, String> {
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

async fn lease(client: &Client) -> Result<Lease, String> {
    Api::<Lease>::namespaced(client.clone(), node::LEASE_NAMESPACE)
        .get_opt(NODE)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no lease".to_owned())
}

fn renew_time(l: &Lease) -> Option<k8s_openapi::jiff::Timestamp> {
    l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_virtual_node_follows_its_offer_tunnel_and_provider() {
    let bins = k8s::binaries().unwrap();
    let opts = Options {
        prefix: format!("vkn{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters: 2,
        nodes: 1,
        overlapping: true,
    };
    let set = Clusters::up(&bins, &opts).await.unwrap();
    let _guard = DownOnDrop(set.prefix.clone());
    let rome_c = set.get("rome").unwrap();
    let milan_c = set.get("milan").unwrap();
    let installed = liqo::install(
        &set,
        &bins,
        &liqo::Options {
            start: vec![],
            ..liqo::Options::default()
        },
    )
    .await
    .unwrap();
    let rome = rome_c.client().await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": TENANT}})).unwrap();
    Api::<Namespace>::all(rome.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    offer(&rome, "4").await;
    tunnel(&rome, "Connected").await;

    // The virtual kubelet's own identity (the chart's ClusterRole and node-lease Role).
    let vk_kubeconfig = &installed.get("rome").unwrap().kubeconfigs["liqo-virtual-kubelet-local"];
    let local = Client::try_from(client_of(vk_kubeconfig, None).await).unwrap();
    let remote = Remote::from_config(client_of(&milan_c.kubeconfig, Some("milan")).await).unwrap();
    let identity = |id: &str, name: &str| ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    };
    let cfg = VkConfig {
        local: local.clone(),
        remote,
        home: identity(&installed.get("rome").unwrap().cluster_id, "rome"),
        foreign: identity(MILAN_ID, "milan"),
        tenant_namespace: TENANT.into(),
        offer: "milan".into(),
        node_ip: "127.0.0.1".parse().unwrap(),
        listen: "127.0.0.1:10250".parse().unwrap(),
        client_ca: None,
        ipam: Some(ipam::service::client::ClientOptions::new(
            "http://127.0.0.1:1",
        )),
        pod_workers: 1,
        lease_duration: Duration::from_secs(40),
        ping_interval: INTERVAL,
        ping_timeout: Duration::from_secs(1),
        extra_labels: [("example.com/extra".to_owned(), "yes".to_owned())].into(),
    };
    let task = tokio::spawn(node::run(Arc::new(cfg)));
    let abort = AbortOnDrop(task);

    // Shape, capacity, Ready with the network up.
    let took = eventually(30, "the virtual node", || {
        node_is(&rome, "4", "True", "False")
    })
    .await;
    println!("TIMING virtual node Ready: {:.2} s", took.as_secs_f64());
    let n = node_is(&rome, "4", "True", "False").await.unwrap();
    assert_eq!(condition(&n, "NetworkUnavailable").1, "LiqoNetworkingUp");

    // The Lease: holder, duration, owner; renewed within the interval.
    eventually(10, "the Lease", || async { lease(&rome).await.map(drop) }).await;
    let l = lease(&rome).await.unwrap();
    let spec = l.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(NODE));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &l.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("Node", n.metadata.uid.as_ref())
    );
    let first = renew_time(&l);
    let took = eventually(INTERVAL.as_secs() + 3, "the Lease renewed", || async {
        let now = renew_time(&lease(&rome).await?);
        if now > first {
            Ok(())
        } else {
            Err(format!("renewTime {now:?}"))
        }
    })
    .await;
    println!("TIMING Lease renewed after: {:.2} s", took.as_secs_f64());

    // The tunnel down: NotReady, NetworkUnavailable; up again: Ready.
    tunnel(&rome, "Connecting").await;
    eventually(10, "NotReady with the tunnel down", || {
        node_is(&rome, "4", "False", "True")
    })
    .await;
    tunnel(&rome, "Connected").await;
    eventually(10, "Ready with the tunnel up", || {
        node_is(&rome, "4", "True", "False")
    })
    .await;
    // A new offer: the capacity follows.
    offer(&rome, "6").await;
    eventually(10, "the new capacity", || {
        node_is(&rome, "6", "True", "False")
    })
    .await;

    // The Node deleted by someone: re-created, its Lease owned by the new one.
    let old = get_node(&rome).await.unwrap().metadata.uid.unwrap();
    Api::<Node>::all(rome.clone())
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    let took = eventually(20, "the node re-created", || async {
        let n = node_is(&rome, "6", "True", "False").await?;
        let uid = n.metadata.uid.unwrap_or_default();
        if uid == old {
            return Err("the old node".into());
        }
        let l = lease(&rome).await?;
        let owners = l.metadata.owner_references.unwrap_or_default();
        if owners.iter().any(|o| o.uid == uid) {
            Ok(())
        } else {
            Err(format!("lease owners {owners:?}"))
        }
    })
    .await;
    println!(
        "TIMING node deleted to re-created with its Lease: {:.2} s",
        took.as_secs_f64()
    );

    // milan's apiserver stopped: the Lease no longer renewed; kcm marks the node Unknown and
    // taints it unreachable; resumed: Ready again.
    let apiserver = milan_c
        .procs
        .iter()
        .find(|p| p.name == "kube-apiserver")
        .unwrap()
        .pid;
    signal(apiserver, "-STOP");
    let frozen = Frozen(apiserver);
    let stopped = Instant::now();
    tokio::time::sleep(INTERVAL * 2).await;
    let held = renew_time(&lease(&rome).await.unwrap());
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        renew_time(&lease(&rome).await.unwrap()),
        held,
        "renewed while milan is stopped"
    );
    eventually(90, "the node Unknown and tainted unreachable", || async {
        let n = get_node(&rome).await?;
        let ready = condition(&n, "Ready").0;
        let tainted = has_taint(&n, "node.kubernetes.io/unreachable", "NoExecute");
        if ready == "Unknown" && tainted {
            Ok(())
        } else {
            Err(format!("Ready {ready}, taints {:?}", n.spec))
        }
    })
    .await;
    println!(
        "TIMING milan stopped to the node Unknown + unreachable: {:.1} s",
        stopped.elapsed().as_secs_f64()
    );
    drop(frozen);
    let took = eventually(60, "Ready again, no unreachable taint", || async {
        let n = node_is(&rome, "6", "True", "False").await?;
        if has_taint(&n, "node.kubernetes.io/unreachable", "NoExecute") {
            Err("still tainted".into())
        } else {
            Ok(())
        }
    })
    .await;
    println!(
        "TIMING milan resumed to the node Ready: {:.1} s",
        took.as_secs_f64()
    );

    // The drain: cordoned, the pod evicted (it stays Terminating: no pod reflection here to
    // finalize it), one left; the delete: pods forced, the node and its Lease gone.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "on-vnode", "namespace": "default"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "registry.example/a:1"}],
            "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists"}]},
    }))
    .unwrap();
    let pods = Api::<Pod>::namespaced(rome.clone(), "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let left = node::drain(&local, NODE, Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(left, 1);
    let n = get_node(&rome).await.unwrap();
    assert_eq!(n.spec.and_then(|s| s.unschedulable), Some(true));
    let p = pods.get("on-vnode").await.unwrap();
    assert!(
        p.metadata.deletion_timestamp.is_some(),
        "not evicted: {:?}",
        p.metadata
    );
    // Still running, the node loop does not undo the cordon.
    tokio::time::sleep(INTERVAL).await;
    assert_eq!(
        get_node(&rome)
            .await
            .unwrap()
            .spec
            .and_then(|s| s.unschedulable),
        Some(true)
    );
    drop(abort);
    node::delete(&local, &identity(MILAN_ID, "milan"))
        .await
        .unwrap();
    assert!(pods.get_opt("on-vnode").await.unwrap().is_none());
    assert!(
        Api::<Node>::all(rome.clone())
            .get_opt(NODE)
            .await
            .unwrap()
            .is_none()
    );
    eventually(30, "the Lease gone with its node", || async {
        match Api::<Lease>::namespaced(rome.clone(), node::LEASE_NAMESPACE)
            .get_opt(NODE)
            .await
        {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Absent: Ok. Someone else's Node of that name: refused, untouched.
    node::delete(&local, &identity(MILAN_ID, "milan"))
        .await
        .unwrap();
    let theirs: Node = serde_json::from_value(json!({"metadata": {"name": NODE,
        "labels": {"liqo.io/type": "virtual-node", "liqo.io/remote-cluster-id": "someone-else"}}}))
    .unwrap();
    Api::<Node>::all(rome.clone())
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let e = node::delete(&local, &identity(MILAN_ID, "milan"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("someone-else"), "{e}");
    assert!(get_node(&rome).await.is_ok());
}

/// Aborts the node loop when the test ends, even on failure.
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), node::NodeError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

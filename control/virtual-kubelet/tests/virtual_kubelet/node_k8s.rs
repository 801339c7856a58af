//! The virtual node on real apiservers (control-plane.md §2.2, §2.4, §2.7): two harness
//! clusters, rome (home) and milan (provider); the chart installed on rome without processes
//! (`testkit::liqo::install` with nothing started: CRDs, ClusterRoles, a token of ServiceAccount
//! `liqo-virtual-kubelet-local`), so `node::run` runs with exactly the chart's RBAC; the
//! ResourceOffer and the TunnelEndpoint written as admin. Checks the node's shape (labels,
//! taint, capacity = the offer, address, port, conditions), the Lease (renewed within the
//! interval), the offer and the tunnel followed, the Node re-created when deleted, milan's
//! apiserver stopped (SIGSTOP) ⇒ the Lease no longer renewed and kube-controller-manager
//! marking the node Unknown with the unreachable taint, resumed ⇒ Ready again; the drain and
//! the delete. Prints the timings it measures.

#[path = "node_k8s/support.rs"]
mod support;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use control::api::discovery::ClusterIdentity;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Namespace, Node, Pod},
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use liqo_virtual_kubelet::{VkConfig, config::Remote, node};
use serde_json::json;
use support::*;
use testkit::{
    k8s::{self, Clusters, Options},
    liqo,
};

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
    let remote = Remote::from_config(
        client_of(&milan_c.kubeconfig, Some("milan")).await,
        liqo_auth::rate::DEFAULT,
    )
    .unwrap();
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
        liqo_network: true,
        ipam: Some(ipam::service::client::ClientOptions::new(
            "http://127.0.0.1:1",
        )),
        pod_workers: 1,
        lease_duration: Duration::from_secs(40),
        ping_interval: INTERVAL,
        ping_timeout: Duration::from_secs(1),
        extra_labels: [("example.com/extra".to_owned(), "yes".to_owned())].into(),
        apiserver_support: false,
        home_api: None,
        reflection: Default::default(),
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
    // WebSocket exec declared (not in k8s-openapi's NodeStatus yet: read untyped).
    let ar = kube::api::ApiResource::erase::<Node>(&());
    let raw = Api::<kube::api::DynamicObject>::all_with(rome.clone(), &ar)
        .get(NODE)
        .await
        .unwrap();
    assert_eq!(
        raw.data["status"]["declaredFeatures"],
        json!(["ExtendWebSocketsToKubelet"])
    );

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

    // The drain: cordoned; the pod, Running and Ready under a PodDisruptionBudget that allows
    // no disruption, is refused (429) until the timeout and stays; the budget gone, it is
    // evicted (it stays Terminating: no pod reflection here to finalize it), one left; the
    // delete: pods forced, the node and its Lease gone.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "on-vnode", "namespace": "default", "labels": {"app": "drain"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "registry.example/a:1"}],
            "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists"}]},
    }))
    .unwrap();
    let pods = Api::<Pod>::namespaced(rome.clone(), "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = json!({"status": {"phase": "Running", "podIP": "10.244.9.9",
        "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status("on-vnode", &PatchParams::default(), &Patch::Merge(&running))
        .await
        .unwrap();
    let pdbs = Api::<PodDisruptionBudget>::namespaced(rome.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "drain"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "drain"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    eventually(30, "the budget allowing no disruption", || async {
        let p = pdbs.get("drain").await.map_err(|e| e.to_string())?;
        let st = p.status.unwrap_or_default();
        if st.current_healthy == 1 && st.disruptions_allowed == 0 {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    })
    .await;
    let started = Instant::now();
    let left = node::drain(&local, NODE, Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(left, 1);
    // Refused until its deadline and not much longer: the client's own retries of the 429
    // (kube's default policy) once held it for minutes.
    assert!(
        (Duration::from_secs(3)..Duration::from_secs(8)).contains(&started.elapsed()),
        "{:?}",
        started.elapsed()
    );
    let p = pods.get("on-vnode").await.unwrap();
    assert!(
        p.metadata.deletion_timestamp.is_none(),
        "evicted despite the budget"
    );
    pdbs.delete("drain", &DeleteParams::default())
        .await
        .unwrap();
    let left = node::drain(&local, NODE, Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(left, 1);
    let p = pods.get("on-vnode").await.unwrap();
    assert!(
        p.metadata.deletion_timestamp.is_some(),
        "not evicted: {:?}",
        p.metadata
    );
    let n = get_node(&rome).await.unwrap();
    assert_eq!(n.spec.and_then(|s| s.unschedulable), Some(true));
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

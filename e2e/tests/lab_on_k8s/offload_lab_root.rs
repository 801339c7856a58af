//! The virtual kubelet on the lab with control planes (`liqo-lab up --k8s`: real API servers,
//! the data plane's operators, Liqo's components as processes with the chart's RBAC, each
//! virtual kubelet a child process of its controller-manager with its own ServiceAccount), as
//! root. rome and milan peer both ways with liqoctl; `liqo-demo` is offloaded from rome to
//! milan with the `Remote` strategy; then, on the real components:
//! 10 home pods Running on `liqo-milan` whose IPs are rome's view of milan's pods; the remote
//! ShadowPods and pods labelled and stripped; chapter 14's Service reflected, every address of a
//! reflected slice reached over TCP, an offloaded pod's token listing its home namespace's
//! pods through the tunnel; claims of class `liqo` provisioned where their first consumer
//! runs (`offload_lab::storage`); a remote pod deleted is re-created by milan alone
//! (also while rome's API server is frozen) and rome shows the restart; a home pod deleted goes
//! remotely first; scale to 0 leaves nothing; the virtual kubelet frozen makes the node
//! Unknown and tainted, killed it comes back and adopts (no duplicates, the orphan removed);
//! `kubectl logs` relays milan's; unpeer is refused while a claim of class `liqo` holds data on
//! milan, and with `--delete-remote-volumes` and 50 pods evicts them, removes the node and the
//! remote namespace, and leaves milan's peering with rome. Prints the timings it measures.
//!
//! Needs the binaries next to this test or in `$LIQO_BIN_DIR` (see lab_k8s_root.rs), and
//! `liqo-virtual-kubelet`.

use crate::lab_k8s;
use crate::offload_lab;

use std::time::{Duration, Instant};

use control::{api::virtualkubelet::ShadowPod, consts::reflection};
use e2e::{lab::k8s, topology::Topology};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use lab_k8s::{DownOnDrop, ONE_AT_A_TIME, ipam_peers, prefix};
use nix::sys::signal::Signal;
use offload_lab::{
    NS, apiserver_pid, client, deployment, pods, restarts, run, running_on, signal, uids, until,
    vk_pid,
};
use serde_json::json;

const NODE: &str = "liqo-milan";

/// Sends SIGCONT to a process when dropped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        signal(self.0, Signal::SIGCONT);
    }
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

fn ready_status(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn tainted_unreachable(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
        })
}

async fn node(rome: &Client) -> Option<Node> {
    Api::<Node>::all(rome.clone()).get_opt(NODE).await.unwrap()
}

async fn node_ready(rome: &Client) -> Result<Node, String> {
    match node(rome).await {
        Some(n) if ready_status(&n).as_deref() == Some("True") => Ok(n),
        Some(n) => Err(format!("Ready {:?}", ready_status(&n))),
        None => Err("no node".into()),
    }
}

/// The ShadowPods of the Deployment's pods (the storage step's stateful pods stay until the
/// unpeer).
async fn shadows(milan: &Client) -> Vec<ShadowPod> {
    Api::<ShadowPod>::namespaced(milan.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| {
            s.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(&format!("{}-", offload_lab::APP)))
        })
        .collect()
}

/// The remote pod of each home pod: same name.
async fn remote_pod(milan: &Client, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(milan.clone(), NS)
        .get_opt(name)
        .await
        .unwrap()
}

/// When a watch of `client` sees pod `name` of [`NS`] deleted (a task started now).
async fn deleted_at(client: &Client, name: &str) -> tokio::task::JoinHandle<Instant> {
    use futures::StreamExt;
    let api = Api::<Pod>::namespaced(client.clone(), NS);
    let rv = api
        .get(name)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let params = kube::api::WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api.watch(&params, &rv).await.unwrap().boxed();
    tokio::spawn(async move {
        while let Some(e) = events.next().await {
            if let kube::api::WatchEvent::Deleted(_) = e.unwrap() {
                return Instant::now();
            }
        }
        panic!("the watch ended before the deletion");
    })
}

/// rome's view of milan's pod CIDR and milan's own, from rome's IPAM.
fn milan_pod_view(k: &k8s::K8sLab, milan_id: &str) -> (Ipv4Net, Ipv4Net) {
    let peers = ipam_peers(k, "rome");
    let p = peers
        .iter()
        .find(|p| p["clusterId"] == milan_id)
        .unwrap_or_else(|| panic!("rome's IPAM has no peer {milan_id}: {peers:?}"));
    let cidr = |f: &str| -> Ipv4Net { p[f].as_str().unwrap().parse().unwrap() };
    (cidr("podView"), cidr("podCIDR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offloaded_pods_run_on_the_provider_and_look_local() {
    dataplane::netns::require_root();
    let _one = ONE_AT_A_TIME.lock().await;
    let p = prefix("v");
    let _guard = DownOnDrop(p.clone());
    let k = k8s::up(
        p.clone(),
        Topology::preset("two-clusters").unwrap(),
        &k8s::Options::default(),
    )
    .await
    .unwrap();
    let _why = k8s::DiagnoseOnPanic::new(&k, &["rome", "milan"]);
    let rome = client(&k, "rome").await;
    let milan = client(&k, "milan").await;
    let milan_id = k.liqo.get("milan").unwrap().cluster_id.clone();
    let rome_id = k.liqo.get("rome").unwrap().cluster_id.clone();

    // The storage fabric's stand-in real class, before the peering (milan's offer names it).
    for c in [&rome, &milan] {
        offload_lab::storage::prepare(c).await;
    }
    let t = Instant::now();
    k.peer("rome", "milan").unwrap();
    k.peer("milan", "rome").unwrap();
    until(120, "liqo-milan Ready on rome", || node_ready(&rome)).await;
    println!("TIMING peering to virtual node Ready: {:.1} s", secs(t));

    // liqo-demo offloaded with Remote (same name on milan).
    Api::<Namespace>::all(rome.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    let t = Instant::now();
    run(
        &k,
        "liqoctl",
        "rome",
        &[
            "offload",
            "namespace",
            NS,
            "--namespace-mapping-strategy",
            "EnforceSameName",
            "--pod-offloading-strategy",
            "Remote",
        ],
    );
    println!("TIMING liqoctl offload namespace: {:.1} s", secs(t));

    // 1. Ten home pods Running on liqo-milan, with IPs in rome's view of milan's pods.
    let t = Instant::now();
    deployment(&rome, 10).await;
    let home = until(120, "10 home pods Running on liqo-milan", || {
        running_on(&rome, NODE, 10)
    })
    .await;
    println!("TIMING 10 pods Running on {NODE}: {:.1} s", secs(t));
    let (view, cidr) = milan_pod_view(&k, &milan_id);
    for h in &home {
        let name = h.metadata.name.clone().unwrap();
        let ip: std::net::Ipv4Addr = h
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .unwrap_or_else(|| panic!("home pod {name} has no podIP"))
            .parse()
            .unwrap();
        let remote = remote_pod(&milan, &name)
            .await
            .unwrap_or_else(|| panic!("no remote pod {name}"));
        let rip: std::net::Ipv4Addr = remote.status.unwrap().pod_ip.unwrap().parse().unwrap();
        assert!(cidr.contains(&rip), "milan's pod {rip} is in {cidr}");
        assert!(view.contains(&ip), "home pod {name}: {ip} is in {view}");
        let host = |a: std::net::Ipv4Addr, n: Ipv4Net| u32::from(a) & !u32::from(n.netmask());
        assert_eq!(host(ip, view), host(rip, cidr), "host bits of {name}");
        let labels = remote.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get(reflection::ORIGIN), Some(&rome_id), "{name}");
        assert_eq!(
            labels.get(reflection::DESTINATION),
            Some(&milan_id),
            "{name}"
        );
        assert_eq!(
            labels.get(reflection::MANAGED_BY).map(String::as_str),
            Some(reflection::MANAGED_BY_SHADOWPOD)
        );
        let spec = remote.spec.unwrap();
        assert!(spec.affinity.is_none(), "remote pod {name} has no affinity");
        assert!(spec.node_selector.is_none_or(|s| s.is_empty()));
    }
    let sps = shadows(&milan).await;
    assert_eq!(sps.len(), 10, "one ShadowPod per home pod");
    for s in &sps {
        let l = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(l.get(reflection::ORIGIN), Some(&rome_id));
        assert_eq!(l.get(reflection::DESTINATION), Some(&milan_id));
        assert!(s.spec.pod.affinity.is_none());
    }

    // The manual's chapter 14: a Service offloaded with Local pods.
    let took = offload_lab::services::offload_a_service(&k, &rome, &milan, &milan_id).await;
    println!("TIMING chapter 14 Service on milan: {took:.1} s");
    // Real packets to every address of a reflected slice.
    let t = Instant::now();
    let reached = offload_lab::reach::reach_reflected_endpoints(&k, &rome, &milan).await;
    println!(
        "TIMING every reflected endpoint reached over TCP: {:.1} s ({reached:?})",
        secs(t)
    );
    // The offloaded pod's token at work: rome's pods listed from milan through the tunnel.
    let t = Instant::now();
    let first = home[0].metadata.name.clone().unwrap();
    let (host, port, listed) =
        offload_lab::api::token_lists_home_pods(&k, &rome, &milan, &milan_id, &first).await;
    println!(
        "TIMING the home API server reached from milan at {host}:{port} with {first}'s token \
         ({listed} pods listed): {:.1} s",
        secs(t)
    );

    // The storage fabric: claims of class liqo provisioned where their first consumer runs.
    let (home_secs, remote_secs) =
        offload_lab::storage::claims_follow_their_first_consumer(&rome, &milan).await;
    println!(
        "TIMING a liqo claim's first consumer Running on a rome node: {home_secs:.1} s; on \
         {NODE} (the copy bound on milan): {remote_secs:.1} s"
    );
    offload_lab::storage_guard::unoffload_keeps_remote_data_unless_asked(&k, &rome, &milan).await;

    // 2. A remote pod deleted: milan re-creates it; rome shows the restart.
    let victim = home[0].metadata.name.clone().unwrap();
    let old = remote_pod(&milan, &victim).await.unwrap().metadata.uid;
    let t = Instant::now();
    Api::<Pod>::namespaced(milan.clone(), NS)
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    until(60, "the remote pod re-created", || {
        let (milan, victim, old) = (milan.clone(), victim.clone(), old.clone());
        async move {
            match remote_pod(&milan, &victim).await {
                Some(p) if p.metadata.uid != old => Ok(()),
                _ => Err("not yet".into()),
            }
        }
    })
    .await;
    println!("TIMING remote pod re-created: {:.1} s", secs(t));
    until(60, "rome's pod shows one restart", || {
        let (rome, victim) = (rome.clone(), victim.clone());
        async move {
            let p = Api::<Pod>::namespaced(rome, NS).get(&victim).await.unwrap();
            let r = restarts(&p);
            if r == [1] {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
    })
    .await;

    // ... also while rome's API server is frozen.
    let victim2 = home[1].metadata.name.clone().unwrap();
    let old2 = remote_pod(&milan, &victim2).await.unwrap().metadata.uid;
    let api_pid = apiserver_pid(&k, "rome");
    signal(api_pid, Signal::SIGSTOP);
    // Resumed even if what follows fails (the teardown needs it answering).
    let resume = Resume(api_pid);
    let frozen = Instant::now();
    Api::<Pod>::namespaced(milan.clone(), NS)
        .delete(&victim2, &DeleteParams::default())
        .await
        .unwrap();
    let recreated = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(p) = remote_pod(&milan, &victim2).await
                && p.metadata.uid != old2
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    drop(resume);
    assert!(
        recreated.is_ok(),
        "milan re-creates the pod while rome is frozen"
    );
    println!(
        "TIMING remote pod re-created while rome's API server was frozen: {:.1} s",
        secs(frozen)
    );
    until(90, "rome's second pod shows one restart", || {
        let (rome, victim2) = (rome.clone(), victim2.clone());
        async move {
            let p = Api::<Pod>::namespaced(rome, NS)
                .get(&victim2)
                .await
                .unwrap();
            let r = restarts(&p);
            if r == [1] {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
    })
    .await;

    // 3. A home pod deleted: the remote pod goes, then the home pod (the order the watches
    // of both API servers see the deletions in).
    let gone = home[2].metadata.name.clone().unwrap();
    let home_deleted = deleted_at(&rome, &gone).await;
    let remote_deleted = deleted_at(&milan, &gone).await;
    let t = Instant::now();
    Api::<Pod>::namespaced(rome.clone(), NS)
        .delete(&gone, &DeleteParams::default())
        .await
        .unwrap();
    let wait = |h: tokio::task::JoinHandle<Instant>, what: &'static str| async move {
        tokio::time::timeout(Duration::from_secs(60), h)
            .await
            .unwrap_or_else(|_| panic!("{what} not deleted within 60 s"))
            .unwrap()
    };
    let (home_at, remote_at) = (
        wait(home_deleted, "the home pod").await,
        wait(remote_deleted, "the remote pod").await,
    );
    assert!(
        remote_at <= home_at,
        "the remote pod went first ({:?} before the home pod)",
        home_at.saturating_duration_since(remote_at)
    );
    println!("TIMING home pod deleted, both sides gone: {:.1} s", secs(t));
    deployment(&rome, 0).await;
    let t = Instant::now();
    until(90, "nothing left remotely after scaling to 0", || {
        let (rome, milan) = (rome.clone(), milan.clone());
        async move {
            let (s, r, h) = (shadows(&milan).await, pods(&milan).await, pods(&rome).await);
            if s.is_empty() && r.is_empty() && h.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} ShadowPods, {} remote pods, {} home pods",
                    s.len(),
                    r.len(),
                    h.len()
                ))
            }
        }
    })
    .await;
    println!("TIMING scale to 0, nothing left: {:.1} s", secs(t));

    // 4. The virtual kubelet frozen: Unknown and tainted; killed: back, adopting.
    deployment(&rome, 10).await;
    until(120, "10 pods again", || running_on(&rome, NODE, 10)).await;
    let before = uids(&shadows(&milan).await);
    let orphan: ShadowPod = serde_json::from_value(json!({
        "apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "ShadowPod",
        "metadata": {"name": "orphan", "namespace": NS, "labels": {
            reflection::ORIGIN: rome_id, reflection::DESTINATION: milan_id}},
        "spec": {"pod": {"containers": [{"name": "main", "image": "nginx:1.27"}]}},
    }))
    .unwrap();
    Api::<ShadowPod>::namespaced(milan.clone(), NS)
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    let vk = vk_pid(p.as_str(), "rome", "milan").expect("rome's virtual kubelet for milan runs");
    let port = |n: Option<Node>| n.as_ref().and_then(control::virtual_node::kubelet_port);
    let port_before = port(node(&rome).await);
    assert!(
        port_before.is_some(),
        "liqo-milan advertises its kubelet port"
    );
    signal(vk, Signal::SIGSTOP);
    let t = Instant::now();
    until(90, "liqo-milan Unknown with the unreachable taint", || {
        let rome = rome.clone();
        async move {
            match node(&rome).await {
                Some(n)
                    if ready_status(&n).as_deref() == Some("Unknown")
                        && tainted_unreachable(&n) =>
                {
                    Ok(())
                }
                Some(n) => Err(format!(
                    "Ready {:?}, unreachable taint {}",
                    ready_status(&n),
                    tainted_unreachable(&n)
                )),
                None => Err("no node".into()),
            }
        }
    })
    .await;
    let unknown_after = secs(t);
    println!(
        "TIMING virtual kubelet frozen -> node Unknown + unreachable taint: {unknown_after:.1} s"
    );
    assert!(unknown_after <= 60.0, "within 60 s ({unknown_after:.1} s)");
    signal(vk, Signal::SIGKILL);
    let t = Instant::now();
    until(60, "liqo-milan Ready again", || node_ready(&rome)).await;
    println!(
        "TIMING virtual kubelet killed -> restarted, node Ready: {:.1} s",
        secs(t)
    );
    let again = vk_pid(p.as_str(), "rome", "milan").expect("restarted");
    assert_ne!(again, vk, "a new process");
    // The same port: the API server's logs and exec reach the new process at once.
    assert_eq!(
        port(node(&rome).await),
        port_before,
        "the kubelet port kept"
    );
    until(60, "the orphan ShadowPod removed", || {
        let milan = milan.clone();
        async move {
            let s = uids(&shadows(&milan).await);
            if s.contains_key("orphan") {
                Err(format!("{} ShadowPods", s.len()))
            } else {
                Ok(())
            }
        }
    })
    .await;
    assert_eq!(
        uids(&shadows(&milan).await),
        before,
        "the same ShadowPods (adopted, none re-made, no duplicate)"
    );
    assert_eq!(pods(&milan).await.len(), 10, "no duplicate remote pod");
    assert_eq!(running_on(&rome, NODE, 10).await.map(|v| v.len()), Ok(10));

    // 5. Logs of a home pod: milan's answer, relayed. In the lab, milan's own API server
    // cannot reach its lab nodes' kubelet (kwok, on loopback) under the node's Hostname
    // address: `kubectl logs` on milan fails, and rome must relay that very answer. (Real log
    // lines through the whole chain: vk_logs_k8s, on plain clusters.)
    let name = pods(&rome).await[0].metadata.name.clone().unwrap();
    let logs = |cluster: &str| {
        let out = k
            .tool(
                "kubectl",
                cluster,
                &["logs", "-n", NS, &name, "--tail", "2"],
            )
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!(
            "kubectl logs {name} --tail 2 on {cluster}: exit {:?}\n{text}",
            out.status.code()
        );
        (out.status.success(), text)
    };
    let (home_ok, home_text) = logs("rome");
    let (remote_ok, remote_text) = logs("milan");
    assert_eq!(home_ok, remote_ok, "the same outcome on both sides");
    if remote_ok {
        assert_eq!(home_text, remote_text, "the remote lines, relayed");
    } else {
        let answer = &remote_text[remote_text
            .find("Get \"")
            .expect("milan's error names its call")..];
        assert!(
            home_text.contains(answer.trim_end()),
            "rome relays milan's answer verbatim: {home_text:?} vs {answer:?}"
        );
    }

    // 6. Unpeer with 50 pods: evicted, the node and the remote namespace gone, milan -> rome
    // still up.
    deployment(&rome, 50).await;
    until(180, "50 pods Running on liqo-milan", || {
        running_on(&rome, NODE, 50)
    })
    .await;
    // The offloaded claim of the storage step holds data on milan: refused, naming it.
    let out = k
        .tool("liqoctl", "rome", &["unpeer", "out-of-band", "milan"])
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "unpeer refused: {err}");
    assert!(
        err.contains("liqo-demo/data (on liqo-milan)"),
        "the refusal names the claim: {err}"
    );
    assert!(node_ready(&rome).await.is_ok(), "nothing changed");
    let t = Instant::now();
    run(
        &k,
        "liqoctl",
        "rome",
        &[
            "unpeer",
            "out-of-band",
            "milan",
            "--timeout",
            "120s",
            "--delete-remote-volumes",
        ],
    );
    println!(
        "TIMING liqoctl unpeer with 50 offloaded pods: {:.1} s",
        secs(t)
    );
    until(120, "liqo-milan gone, no pod bound to it", || {
        let rome = rome.clone();
        async move {
            let on = pods(&rome)
                .await
                .into_iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NODE))
                .count();
            match (node(&rome).await, on) {
                (None, 0) => Ok(()),
                (n, on) => Err(format!("node present {}, {on} pods on it", n.is_some())),
            }
        }
    })
    .await;
    until(120, "the remote namespace gone", || {
        let milan = milan.clone();
        async move {
            match Api::<Namespace>::all(milan).get_opt(NS).await.unwrap() {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
    println!(
        "TIMING unpeer -> node and remote namespace gone: {:.1} s",
        secs(t)
    );
    let reverse = Api::<Node>::all(milan.clone())
        .get_opt("liqo-rome")
        .await
        .unwrap()
        .expect("milan's virtual node for rome stays");
    assert_eq!(ready_status(&reverse).as_deref(), Some("True"));
}

//! Real nodes, as root: the main job as a user runs it, `liqo-lab quickstart --k8s
//! --real-nodes` (the lab's images built by `chart/images/build.sh --images e2e/images`; every
//! lab node running containerd, a kubelet and kube-proxy, CoreDNS on one; Liqo installed by
//! `liqoctl install` from its chart ([`crate::real_nodes_chart`]); peering by `liqoctl`;
//! `liqo-demo` offloaded; 100 requests to the demo's Service answered by both clusters), its
//! report checked; then on the lab it leaves: every Node Ready with its kubelet's and runtime's
//! versions; a pod in real containers (its readiness probe passes); `kubectl exec` in it
//! resolves `kubernetes.default` through CoreDNS and reaches the API server through the
//! `kubernetes` Service; `kubectl logs -f` follows a container; a lab pod of the other node
//! reaches it at its pod address and the pod reaches itself through its Service; the offloaded
//! demo pods ([`crate::real_nodes_offload`]); with two gateway replicas per cluster, the active
//! gateway killed -9 while a pod probes across (traffic back within 5 s, the standby active,
//! the killed one back as the standby; then every pod pair across both clusters answers); then
//! a `liqo` claim's 100 MiB on milan, moved to rome by `liqoctl move volume`
//! ([`crate::real_nodes_storage`]), and a database-like service with a replica and a `liqo`
//! volume in each cluster surviving its pods ([`crate::real_nodes_stateful`]).
//! Everything is torn down (cgroups, mounts, files) by `liqo-lab down`, also when the test
//! fails.
//!
//! Needs the binaries next to this test or in `$LIQO_BIN_DIR` (see lab_k8s_root.rs), with
//! `liqo-demo`; the node binaries come from `e2e/k8s/build.sh node`.

use crate::lab_k8s;

use std::{
    io::{BufRead, BufReader, Read, Write},
    process::Stdio,
    time::{Duration, Instant},
};

use crate::offload_lab::run;
use dataplane::Netns;
use e2e::lab::k8s::{self, K8sLab, realnode};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, api::ListParams};
use lab_k8s::{DownOnDrop, ONE_AT_A_TIME, prefix};
use serde_json::json;

/// A child process killed (and reaped) when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Err(e) = self.0.kill() {
            eprintln!("killing kubectl logs -f: {e}");
        }
        if let Err(e) = self.0.wait() {
            eprintln!("reaping kubectl logs -f: {e}");
        }
    }
}

fn demo_pod() -> serde_json::Value {
    let image = "localhost/liqo-lab/liqo-demo:lab";
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "demo", "namespace": "default", "labels": {"app": "demo"}},
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "demo", "image": image, "imagePullPolicy": "Never",
                 "env": [
                     {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                     {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                     {"name": "CLUSTER_NAME", "value": "rome"}],
                 "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1}},
                {"name": "ticker", "image": image, "imagePullPolicy": "Never",
                 "command": ["bash", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"]},
            ],
        },
    })
}

async fn ready_pod(rome: &kube::Client) -> Pod {
    let api: Api<Pod> = Api::namespaced(rome.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let p = api.get("demo").await.unwrap();
        if k8s::demo::ready(&p) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "demo not Ready in 90 s: {:?}",
            p.status
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A plain HTTP GET from inside lab pod netns `ns` to `addr`: the answer's body.
fn get_from(ns: &str, addr: std::net::SocketAddr) -> String {
    let netns = Netns::open(&ns.parse().unwrap()).unwrap();
    netns
        .run(move || -> std::io::Result<String> {
            let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
        })
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_nodes_run_containers_with_cluster_dns_the_api_server_logs_and_exec() {
    dataplane::netns::require_root();
    let _one = ONE_AT_A_TIME.lock().await;
    let p = prefix("rn");
    let _guard = DownOnDrop(p.clone());
    let t = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-lab"))
        .args([
            "--prefix",
            p.as_str(),
            "quickstart",
            "--k8s",
            "--real-nodes",
            "--gateway-replicas",
            "2",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "TIMING liqo-lab quickstart --k8s --real-nodes: {:.1} s\n{report}",
        t.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "quickstart: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    crate::real_nodes_report::check(&report, &p);
    let k = K8sLab::load(&p).unwrap();
    // Whatever fails below, the lab's state next to the panic (before the lab goes).
    let _why = e2e::lab::k8s::DiagnoseOnPanic::new(&k, &["rome", "milan"]);
    crate::real_nodes_chart::installed_from_chart(&k).await;

    // Every node Ready, with the versions its kubelet and runtime report.
    for c in &k.lab.topology.clusters {
        let client = k.set.get(c.name.as_str()).unwrap().client().await.unwrap();
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            // The virtual node (liqo-milan on rome) is Liqo's, not the lab's.
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("liqo.io/type"))
                    .is_none_or(|t| t != "virtual-node")
            })
            .collect::<Vec<_>>();
        assert_eq!(nodes.len(), c.nodes.len(), "{}", c.name);
        for n in &nodes {
            let info = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .unwrap();
            assert_eq!(info.kubelet_version, "v1.36.3", "{:?}", n.metadata.name);
            assert!(
                info.container_runtime_version
                    .starts_with("containerd://2."),
                "{:?}: {}",
                n.metadata.name,
                info.container_runtime_version
            );
            assert!(k8s::nodes::ready(n), "{:?} not Ready", n.metadata.name);
        }
        eprintln!(
            "{}",
            run(
                &k,
                "kubectl",
                c.name.as_str(),
                &["get", "nodes", "-o", "wide"]
            )
        );
    }

    // The demo in real containers, Ready by its probe.
    let rome = k.set.get("rome").unwrap().client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(rome.clone(), "default");
    pods.create(
        &Default::default(),
        &serde_json::from_value(demo_pod()).unwrap(),
    )
    .await
    .unwrap();
    let t = Instant::now();
    let pod = ready_pod(&rome).await;
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    eprintln!(
        "TIMING the demo pod Ready: {:.1} s (at {ip})",
        t.elapsed().as_secs_f64()
    );
    let slice = k.lab.topology.cluster("rome").unwrap().nodes[1].pod_slice;
    assert!(
        slice.contains(&ip.parse::<std::net::Ipv4Addr>().unwrap()),
        "{ip} in {slice}"
    );

    // exec: cluster DNS and the API server through the kubernetes Service.
    let exec = |script: &str| {
        run(
            &k,
            "kubectl",
            "rome",
            &["exec", "demo", "-c", "demo", "--", "bash", "-c", script],
        )
    };
    let resolved = exec("getent hosts kubernetes.default");
    let service_ip = k
        .lab
        .topology
        .cluster("rome")
        .unwrap()
        .service_cidr
        .hosts()
        .next()
        .unwrap();
    assert!(
        resolved.starts_with(&format!("{service_ip} ")),
        "{resolved}"
    );
    // Plain HTTP to the API server's TLS port: Go's TLS server answers 400 in clear.
    let api = exec(
        "exec 3<>/dev/tcp/kubernetes.default/443 && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && head -c 12 <&3",
    );
    assert_eq!(
        api, "HTTP/1.0 400",
        "the API server answers through the kubernetes Service"
    );

    // logs -f follows the ticker.
    let follow = k
        .tool_command(
            "kubectl",
            "rome",
            &["logs", "-f", "demo", "-c", "ticker", "--tail", "1"],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed when dropped, also when an assertion fails.
    let mut follow = KillOnDrop(follow);
    let stdout = follow.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let l = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a line of logs -f within 10 s")
            .unwrap();
        seen.push(l.trim_start_matches("tick ").parse::<u64>().unwrap());
    }
    drop(follow);
    assert!(
        seen.windows(2).all(|w| w[1] == w[0] + 1),
        "followed in order: {seen:?}"
    );

    // port-forward: a local port reaches the container through the API server and the kubelet.
    let forward = k
        .tool_command("kubectl", "rome", &["port-forward", "pod/demo", "0:8080"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut forward = KillOnDrop(forward);
    let mut first = String::new();
    // Kept open until kubectl is killed: it writes a line per connection (a closed pipe would
    // kill it mid-request).
    let mut said = BufReader::new(forward.0.stdout.take().unwrap());
    said.read_line(&mut first).unwrap();
    // "Forwarding from 127.0.0.1:40123 -> 8080"
    let local: std::net::SocketAddr = first
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("kubectl port-forward said {first:?}"));
    let mut s = std::net::TcpStream::connect_timeout(&local, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /?format=text HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(
        answer.contains("pod=demo "),
        "through port-forward: {answer}"
    );
    drop(forward);
    drop(said);

    // A lab pod of the other node reaches the demo; the demo reaches itself by its Service.
    let body = get_from(
        &format!("{p}-rome-n0-p0"),
        format!("{ip}:8080").parse().unwrap(),
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["pod"].as_str(), v["node"].as_str()),
        (Some("demo"), Some("n1")),
        "{body}"
    );
    let client = k.lab.topology.cluster("rome").unwrap().nodes[0].pods[0]
        .addr
        .addr();
    assert!(
        v["client"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{client}:")),
        "{body}"
    );
    run(
        &k,
        "kubectl",
        "rome",
        &[
            "expose",
            "pod",
            "demo",
            "--port",
            "80",
            "--target-port",
            "8080",
        ],
    );
    let via_service = exec(
        "exec 3<>/dev/tcp/demo.default.svc.cluster.local/80 && printf 'GET /?format=text HTTP/1.0\\r\\n\\r\\n' >&3 && tail -n1 <&3",
    );
    assert!(via_service.contains("pod=demo"), "{via_service}");
    eprintln!("the demo through its Service: {via_service}");

    // The quickstart's offloaded demo: real containers on milan, logs, exec, mounts.
    crate::real_nodes_offload::offloaded_demo(&k).await;

    // Gateway HA: the active gateway killed -9 while a rome pod probes milan: traffic resumes
    // within 5 s, the standby is the active one, the killed one comes back as the standby;
    // then every pod still reaches every other across both clusters.
    // (About half the runs once lost 10 to 50 s here: the killed gateway's host rule, left on
    // its node, sent that node's pods into the dead gateway until its container restarted; the
    // gateway's rule now comes after the overlay's, and the test no longer tries twice.)
    let f = k8s::failover::kill_active_gateway(&k, "rome")
        .await
        .unwrap();
    eprintln!("TIMING failover: {f:?}");
    assert!(f.outage.up_at_end, "{f:?}");
    assert_eq!(f.relapses, 0, "the new active gateway stepped down: {f:?}");
    assert!(f.outage.longest_gap < Duration::from_secs(5), "{f:?}");
    assert_ne!(f.killed.1, f.active.1, "{f:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = k8s::views::check(&k).await.unwrap();
        if m.failures().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the failover:\n{}",
            m.render()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The storage fabric (after the failover, which is timed on a lab as the quickstart left
    // it): 100 MiB on liqo-milan, kept across pods, moved to rome verified; a database-like
    // service, one replica per cluster on its own liqo volume. First: the failover lost the
    // egress NAT of rome's connections to milan's API server; the peer clients' TCP keepalive
    // finds them dead and the virtual kubelet's remote watches start again by themselves.
    crate::real_nodes_storage::remote_watches_recover(&k).await;
    crate::real_nodes_storage::claims_move(&k).await;
    crate::real_nodes_stateful::survives_its_pods(&k).await;

    // Gone below: nothing left to diagnose.
    drop(_why);
    let down = k8s::down(&p).unwrap();
    eprintln!("down: {down:?}");
    let dirs = [
        std::path::Path::new(realnode::DATA_ROOT).join(p.as_str()),
        std::path::PathBuf::from(format!("/run/liqo-lab/{p}.d")),
    ];
    for d in &dirs {
        assert!(!d.exists(), "{} left", d.display());
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&format!("/liqo-lab/{p}")),
        "mounts left:\n{mounts}"
    );
    assert!(
        !mounts.contains(" /proc/sys/"),
        "a tunable's copy left mounted:\n{mounts}"
    );
    let cgroups = std::process::Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "6", "-type", "d", "-name"])
        .arg(format!("liqo-lab-{p}"))
        .output()
        .unwrap();
    assert!(cgroups.status.success());
    assert!(
        cgroups.stdout.is_empty(),
        "cgroups left: {}",
        String::from_utf8_lossy(&cgroups.stdout)
    );
    let ours = format!("/liqo-lab/{p}/");
    let links: Vec<_> = std::fs::read_dir("/var/log/containers")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|l| {
                    std::fs::read_link(l).is_ok_and(|t| t.to_string_lossy().contains(&ours))
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(links.is_empty(), "container log links left: {links:?}");
}

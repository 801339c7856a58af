//! The lab with real control planes (`liqo-lab up --k8s`), as root, on the harness: each lab
//! cluster gets an API server whose Nodes are the lab's nodes, Liqo, a relay per node to the
//! API server and the IPAM, and the gateway and overlay daemons in the node namespaces; with
//! the operators, `liqoctl` peering makes every pod reach every pod of the other cluster, and
//! `liqoctl unpeer` leaves no rule, route or NAT element of the peer. Everything runs under a
//! per-test prefix and is torn down even when a test fails.
//!
//! Needs the binaries next to this test or in `$LIQO_BIN_DIR`: `cargo build -p e2e -p ipam -p
//! liqo-auth -p liqo-controller-manager -p liqoctl -p gateway -p overlay -p liqo-netops --bins`.

use std::{
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use dataplane::Netns;
use e2e::{
    lab::{
        Prefix,
        k8s::{self, K8sLab, fabric::GATEWAY_SERVICE, nodes, relay},
    },
    topology::Topology,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::ListParams};

/// Tears the lab down even when the test fails.
struct DownOnDrop(Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        if let Err(e) = k8s::down(&self.0) {
            eprintln!("tearing down {}: {}", self.0, liqo_types::chain(&e));
        }
    }
}

fn prefix(tag: &str) -> Prefix {
    format!("lk{tag}{}", std::process::id() % 100_000)
        .parse()
        .unwrap()
}

fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z")
}

/// Every process whose command line mentions `needle`.
fn procs_mentioning(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(needle) && !gone(pid) {
            out.push(pid);
        }
    }
    out
}

/// What must be gone after `down`: namespaces, the harness's directory, every process.
fn assert_all_gone(p: &Prefix, pids: &[u32]) {
    let left: Vec<String> = Netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| p.owns(n))
        .map(|n| n.to_string())
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    assert!(
        !std::path::Path::new(e2e::k8s::ROOT)
            .join(p.as_str())
            .exists(),
        "the harness's directory is left"
    );
    for pid in pids {
        assert!(gone(*pid), "pid {pid} survived down");
    }
    let needle = format!("/run/liqo-lab/{p}.d/");
    assert!(procs_mentioning(&needle).is_empty(), "relays left");
    let needle = format!("{}/{p}/", e2e::k8s::ROOT);
    assert!(
        procs_mentioning(&needle).is_empty(),
        "harness processes left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_k8s_gives_every_lab_cluster_a_control_plane_whose_nodes_are_the_lab_nodes() {
    dataplane::netns::require_root();
    let p = prefix("a");
    let _guard = DownOnDrop(p.clone());
    let t = Instant::now();
    let k = k8s::up(
        p.clone(),
        Topology::preset("two-clusters").unwrap(),
        &k8s::Options { operators: false },
    )
    .await
    .unwrap();
    eprintln!(
        "up --k8s (no operators): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let again = K8sLab::load(&p).unwrap();
    assert_eq!(again.set.clusters.len(), 2);

    let mut pids = Vec::new();
    for c in &k.lab.topology.clusters {
        let kc = k.set.get(c.name.as_str()).unwrap();
        assert_eq!(
            kc.pod_cidr, c.pod_cidr,
            "the harness cluster has the lab's pod CIDR"
        );
        let client = kc.client().await.unwrap();
        let api: Api<Node> = Api::all(client.clone());
        let list = api.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(list.len(), c.nodes.len(), "only the lab's nodes");
        assert_eq!(nodes::check(c, &list), None);
        // kwok keeps them Ready with the InternalIP set here (its heartbeat keeps addresses).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let list = api.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(nodes::check(c, &list), None, "after kwok's heartbeats");

        // The gateway's Service says the cluster's public address.
        let svc = Api::<Service>::namespaced(client.clone(), e2e::liqo::NAMESPACE)
            .get(GATEWAY_SERVICE)
            .await
            .unwrap();
        let ingress = svc.status.unwrap().load_balancer.unwrap().ingress.unwrap();
        assert_eq!(
            ingress[0].ip.as_deref(),
            Some(c.wan_addr.addr().to_string().as_str())
        );

        // Liqo runs; its IPAM has the lab's pod CIDR and reserved subnets.
        let i = k.liqo.get(c.name.as_str()).unwrap();
        for r in &i.running {
            assert!(!gone(r.proc.pid), "{} of {} exited", r.program, c.name);
            pids.push(r.proc.pid);
        }

        for n in &c.nodes {
            let ns = Netns::open(&k.lab.node_netns(c.name.as_str(), n.name.as_str())).unwrap();
            // The relay: the API server and the IPAM inside every node.
            for a in [relay::API_LISTEN, relay::IPAM_LISTEN] {
                let a: SocketAddr = a.parse().unwrap();
                let ok = ns
                    .run(|| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
                    .unwrap();
                assert!(ok, "{a} in {}/{}", c.name, n.name);
            }
            let out = ns
                .command(k.liqo.bin.join("kubectl"))
                .args(["--kubeconfig"])
                .arg(&kc.kubeconfig)
                .args(["--server", &format!("https://{}", relay::API_LISTEN)])
                .args(["get", "node", n.name.as_str(), "-o", "name"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "kubectl through the relay in {}/{}: {}",
                c.name,
                n.name,
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("node/{}", n.name)
            );
            let out = ns
                .command(e2e::lab::bin("liqo-ipam").unwrap())
                .args(["list", "-o", "json"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains(&c.pod_cidr.to_string()), "{text}");
            for r in &c.reserved_subnets {
                assert!(text.contains(&r.to_string()), "{r} not reserved: {text}");
            }
            // The overlay agent runs in the node.
            e2e::lab::overlay_status(&ns).unwrap();
            pids.extend(ns.pids().unwrap());
        }
    }
    // Without peerings, check probes within each cluster only, and all pass.
    let m = k8s::views::check(&k).await.unwrap();
    assert!(!m.probes.is_empty());
    assert!(m.failures().is_empty(), "{}", m.render());

    let d = k8s::down(&p).unwrap();
    eprintln!(
        "down: {} namespaces, {} lab processes, {} control-plane processes, {} relays",
        d.lab.namespaces, d.lab.processes, d.k8s, d.relays
    );
    assert_eq!(d.relays, 4, "one relay per node");
    assert!(d.k8s >= 2 * 8, "{} control-plane processes", d.k8s);
    assert_all_gone(&p, &pids);
}

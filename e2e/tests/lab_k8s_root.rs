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

/// One lab with control planes at a time (the machine is small).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _one = ONE_AT_A_TIME.lock().await;
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

/// The kernel state the fabric owns in every node of the lab and in every gateway's own
/// namespace: rules and routes of tables 18951/18952, and the gateway's nft ruleset (with
/// counters blanked): what must be back as before once the peers are gone.
fn fabric_state(k: &K8sLab) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let counters = |t: &str| {
        t.lines()
            .map(|l| match l.find("counter packets") {
                Some(i) => {
                    let rest = &l[i..];
                    let end = rest.find(" bytes ").map_or(rest.len(), |b| {
                        let after = &rest[b + 7..];
                        b + 7 + after.find(' ').unwrap_or(after.len())
                    });
                    format!("{}counter{}", &l[..i], &rest[end..])
                }
                None => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for c in &k.lab.topology.clusters {
        let mut names: Vec<String> = c
            .nodes
            .iter()
            .map(|n| {
                k.lab
                    .node_netns(c.name.as_str(), n.name.as_str())
                    .to_string()
            })
            .collect();
        names.push(format!("{}-{}-gw", k.lab.prefix, c.name));
        for ns in names {
            let run = |args: &[&str]| {
                let o = std::process::Command::new("ip")
                    .args(["-n", &ns])
                    .args(args)
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            out.push((format!("{ns} rules"), run(&["rule"])));
            for t in ["18951", "18952"] {
                out.push((
                    format!("{ns} table {t}"),
                    run(&["route", "show", "table", t]),
                ));
            }
            let nft = std::process::Command::new("ip")
                .args(["netns", "exec", &ns, "nft", "list", "ruleset"])
                .output()
                .unwrap();
            out.push((
                format!("{ns} nft"),
                counters(&String::from_utf8_lossy(&nft.stdout)),
            ));
        }
    }
    out
}

/// The peers `liqo-ipam list` shows in `cluster` (asked through the relay of its first node).
fn ipam_peers(k: &K8sLab, cluster: &str) -> Vec<serde_json::Value> {
    let c = k.lab.topology.cluster(cluster).unwrap();
    let ns = Netns::open(&k.lab.node_netns(cluster, c.nodes[0].name.as_str())).unwrap();
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
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["peers"].as_array().cloned().unwrap_or_default()
}

/// Peers every pair (`consumer -> provider`) with liqoctl, then requires every probe of
/// `check` (from the TunnelEndpoints) to pass and NETWORKING Established on both sides; then
/// unpeers them all and requires the kernel state and the IPAMs as before.
async fn peer_check_unpeer(k: &K8sLab, pairs: &[(&str, &str)]) {
    let before = fabric_state(k);
    for (consumer, provider) in pairs {
        let t = Instant::now();
        let took = k.peer(consumer, provider).unwrap();
        let first = k
            .first_cross_probe(consumer, provider, t, 60)
            .await
            .unwrap();
        eprintln!(
            "{consumer} -> {provider}: liqoctl peer returned in {:.2} s; first cross-cluster \
             probe passed {:.2} s after liqoctl peer started",
            took.as_secs_f64(),
            first.as_secs_f64()
        );
        assert!(
            first <= Duration::from_secs(10),
            "{consumer} -> {provider}: first packet after {first:?} (target <= 10 s)"
        );
    }
    // Every TunnelEndpoint (both sides of every pair), Connected, and every probe passes.
    let want_teps = 2 * pairs.len();
    let t = Instant::now();
    let m = loop {
        let tunnels = k8s::views::tunnels(k).await.unwrap();
        let connected = tunnels
            .iter()
            .filter(|t| t.connection == Some(control::api::net::ConnectionStatus::Connected))
            .count();
        let m = k8s::views::check(k).await.unwrap();
        if (connected == want_teps && m.failures().is_empty()) || t.elapsed().as_secs() > 30 {
            assert_eq!(tunnels.len(), want_teps, "{tunnels:?}");
            assert_eq!(connected, want_teps, "{tunnels:?}");
            break m;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    print!("{}", m.render());
    assert!(m.failures().is_empty(), "{}", m.render());
    let pods: usize = k
        .lab
        .topology
        .clusters
        .iter()
        .map(|c| c.pods().count())
        .sum();
    assert_eq!(
        m.probes.len(),
        pods * (pods - 1),
        "every pod to every other pod"
    );
    for (consumer, provider) in pairs {
        for (here, there) in [(consumer, provider), (provider, consumer)] {
            let fcs = k8s::views::networking(k, here).await.unwrap();
            let fc = fcs.iter().find(|(name, _)| name == there);
            assert_eq!(
                fc.map(|(_, s)| s.as_str()),
                Some("Established"),
                "NETWORKING of {there} on {here}: {fcs:?}"
            );
        }
        for c in [consumer, provider] {
            println!(
                "kubectl --context {c} get foreignclusters\n{}",
                k.foreign_clusters(c).unwrap()
            );
        }
    }

    for (consumer, provider) in pairs {
        let took = k.unpeer(consumer, provider).unwrap();
        eprintln!(
            "{consumer} -> {provider}: liqoctl unpeer returned in {:.2} s",
            took.as_secs_f64()
        );
    }
    let t = Instant::now();
    loop {
        let now = fabric_state(k);
        let ipams_empty = k
            .lab
            .topology
            .clusters
            .iter()
            .all(|c| ipam_peers(k, c.name.as_str()).is_empty());
        if (now == before && ipams_empty) || t.elapsed().as_secs() > 30 {
            for ((what, a), (_, b)) in before.iter().zip(&now) {
                assert_eq!(a, b, "{what}: before peering, then after unpeering");
            }
            for c in &k.lab.topology.clusters {
                assert_eq!(
                    ipam_peers(k, c.name.as_str()),
                    Vec::<serde_json::Value>::new()
                );
            }
            eprintln!(
                "kernel state and IPAMs as before peering {:.2} s after the last unpeer",
                t.elapsed().as_secs_f64()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(k8s::views::tunnels(k).await.unwrap().is_empty());
}

/// The acceptance 1 and 3 (two clusters) and 2 (three, full mesh).
async fn acceptance(tag: &str, preset: &str, pairs: &[(&str, &str)]) {
    dataplane::netns::require_root();
    let _one = ONE_AT_A_TIME.lock().await;
    let p = prefix(tag);
    let _guard = DownOnDrop(p.clone());
    let t = Instant::now();
    let k = k8s::up(
        p.clone(),
        Topology::preset(preset).unwrap(),
        &k8s::Options::default(),
    )
    .await
    .unwrap();
    eprintln!(
        "up --k8s --preset {preset}: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Before any peering: every cluster's probes pass, no TunnelEndpoint.
    assert!(k8s::views::tunnels(&k).await.unwrap().is_empty());
    let m = k8s::views::check(&k).await.unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
    peer_check_unpeer(&k, pairs).await;
    let mut pids = Vec::new();
    for i in &k.liqo.clusters {
        pids.extend(i.running.iter().map(|r| r.proc.pid));
    }
    let d = k8s::down(&p).unwrap();
    assert!(d.relays > 0 && d.k8s > 0, "{d:?}");
    assert_all_gone(&p, &pids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_peered_by_liqoctl_reach_every_pod_and_unpeer_leaves_nothing() {
    acceptance("b", "two-clusters", &[("rome", "milan")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_in_a_full_mesh_reach_every_pod_and_unpeer_leaves_nothing() {
    acceptance(
        "c",
        "three-clusters",
        &[("rome", "milan"), ("milan", "turin"), ("turin", "rome")],
    )
    .await;
}

//! The lab with real control planes (`liqo-lab up --k8s`), as root, on the harness: each lab
//! cluster gets an API server whose Nodes are the lab's nodes, Liqo, a relay per node to the
//! API server and the IPAM, and the gateway and overlay daemons in the node namespaces; with
//! the operators, `liqoctl` peering makes every pod reach every pod of the other cluster, and
//! `liqoctl unpeer` leaves no rule, route or NAT element of the peer. Everything runs under a
//! per-test prefix and is torn down even when a test fails.
//!
//! Needs the binaries next to this test or in `$LIQO_BIN_DIR`: `cargo build -p e2e -p ipam -p
//! liqo-auth -p liqo-controller-manager -p liqoctl -p gateway -p overlay -p liqo-netops --bins`.

use crate::lab_k8s;

use std::{
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use dataplane::Netns;
use e2e::{
    lab::k8s::{self, K8sLab, fabric::GATEWAY_SERVICE, nodes, relay},
    topology::Topology,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, api::ListParams};
use lab_k8s::{DownOnDrop, ONE_AT_A_TIME, assert_all_gone, fabric_state, gone, ipam_peers, prefix};

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
        &k8s::Options {
            operators: false,
            ..k8s::Options::default()
        },
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

/// Peers every pair (`consumer -> provider`) with liqoctl, then requires every probe of
/// `check` (from the TunnelEndpoints) to pass and NETWORKING Established on both sides; with
/// `rotate` (`(cluster, from)`), rotates that cluster's gateway key twice while `from` probes it
/// ([`rotations`]); then unpeers them all and requires the kernel state and the IPAMs as before.
async fn peer_check_unpeer(k: &K8sLab, pairs: &[(&str, &str)], rotate: Option<(&str, &str)>) {
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
        // How soon is the peering bench's figure (`liqo-bench peering`), not a test's bound: a
        // 10 s bound here failed at 12.7 s on a loaded CI machine. The probe itself must pass
        // within 60 s (above).
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
            // The condition follows the gateways' reports: traffic may flow a little before
            // it says so (a loaded CI machine once read Pending right after every probe
            // passed). Bounded: a condition that never catches up fails.
            let t = Instant::now();
            loop {
                let fcs = k8s::views::networking(k, here).await.unwrap();
                let fc = fcs.iter().find(|(name, _)| name == there);
                if fc.map(|(_, s)| s.as_str()) == Some("Established") {
                    break;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(30),
                    "NETWORKING of {there} on {here} not Established 30 s after every probe \
                     passed: {fcs:?}"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            println!(
                "NETWORKING of {there} on {here}: Established {:.1} s after the probes",
                t.elapsed().as_secs_f64()
            );
        }
        for c in [consumer, provider] {
            println!(
                "kubectl --context {c} get foreignclusters\n{}",
                k.foreign_clusters(c).unwrap()
            );
        }
    }
    if let Some((cluster, from)) = rotate {
        rotations(k, cluster, from, 2 * pairs.len()).await;
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
            assert_eq!(
                before.iter().map(|(w, _)| w).collect::<Vec<_>>(),
                now.iter().map(|(w, _)| w).collect::<Vec<_>>(),
                "the same places are read before and after"
            );
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

/// Issue 26's acceptance 4: `cluster`'s gateway key rotated by `liqoctl rotate-key`, then by
/// deleting its Secret, each while `from` pings it and probes it over TCP: traffic resumes
/// within 5 s with no manual step, the gateway's status shows the new key (published as
/// such), every TunnelEndpoint (`teps` of them) is Connected again and every probe of `check`
/// passes.
async fn rotations(k: &K8sLab, cluster: &str, from: &str, teps: usize) {
    use e2e::lab::k8s::rotate::Trigger;
    let mut keys = Vec::new();
    for trigger in [Trigger::Liqoctl, Trigger::DeleteSecret] {
        let r = k
            .rotate_key(
                cluster,
                from,
                trigger,
                Duration::from_secs(3),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        eprintln!(
            "rotation by {trigger:?}:\n{}{}",
            r.liqoctl.clone().unwrap_or_default(),
            r.render()
        );
        assert_ne!(r.new_key, r.old_key, "{trigger:?}");
        assert_eq!(
            r.published, r.new_key,
            "{trigger:?}: the published key is not the one running"
        );
        assert!(
            r.worst() <= Duration::from_secs(5),
            "{trigger:?}: traffic interrupted for {:?} (target <= 5 s)",
            r.worst()
        );
        assert!(
            r.tcp.up_at_end && r.tcp.answered > 0,
            "{trigger:?}: {:?}",
            r.tcp
        );
        assert!(r.ping.0 > 0, "{trigger:?}: no ping answered");
        if let Some(out) = &r.liqoctl {
            let peers = k8s::views::tunnels(k)
                .await
                .unwrap()
                .iter()
                .filter(|t| t.cluster == cluster)
                .count();
            assert!(
                out.contains(&format!(
                    "Key rotated: {peers} peer(s) connected with the new key"
                )),
                "{out}"
            );
            assert!(
                out.contains(&format!(
                    "The gateway runs the new key: public key {}",
                    r.new_key
                )),
                "{out}"
            );
        }
        keys.push(r.old_key.clone());
        keys.push(r.new_key.clone());
        let m = k8s::views::check(k).await.unwrap();
        assert!(
            m.failures().is_empty(),
            "after rotation by {trigger:?}:\n{}",
            m.render()
        );
        let tunnels = k8s::views::tunnels(k).await.unwrap();
        let connected = tunnels
            .iter()
            .filter(|t| t.connection == Some(control::api::net::ConnectionStatus::Connected))
            .count();
        assert_eq!(connected, teps, "{tunnels:?}");
    }
    let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
    assert_eq!(distinct.len(), 3, "three keys in turn: {keys:?}");
}

/// The acceptance 1 and 3 (two clusters) and 2 (three, full mesh).
async fn acceptance(tag: &str, preset: &str, pairs: &[(&str, &str)], rotate: Option<(&str, &str)>) {
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
    peer_check_unpeer(&k, pairs, rotate).await;
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
    acceptance("b", "two-clusters", &[("rome", "milan")], None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_in_a_full_mesh_reach_every_pod_and_unpeer_leaves_nothing() {
    acceptance(
        "c",
        "three-clusters",
        &[("rome", "milan"), ("milan", "turin"), ("turin", "rome")],
        Some(("milan", "rome")),
    )
    .await;
}

/// `liqo-lab down` after `liqo-lab up --k8s` was killed in the middle (its control planes
/// started, the rest not): nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_after_a_crash_in_the_middle_of_up_k8s_leaves_nothing() {
    dataplane::netns::require_root();
    let _one = ONE_AT_A_TIME.lock().await;
    let p = prefix("d");
    let _guard = DownOnDrop(p.clone());
    let lab = e2e::lab::bin("liqo-lab").unwrap();
    let mut up = std::process::Command::new(&lab)
        .args(["--prefix", p.as_str(), "up", "--k8s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until the second cluster's API server has its kubeconfig: mid-way.
    let milan = std::path::Path::new(e2e::k8s::ROOT)
        .join(p.as_str())
        .join("milan")
        .join("kubeconfig");
    let reached = lab_k8s::eventually(60, || milan.is_file()).await;
    up.kill().unwrap();
    up.wait().unwrap();
    assert!(reached, "up --k8s never reached milan's API server");
    let left = Netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| p.owns(n))
        .count();
    assert!(left > 0, "the crash left the lab's namespaces");
    let out = std::process::Command::new(&lab)
        .args(["--prefix", p.as_str(), "down"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(text.contains("control-plane processes"), "{text}");
    assert_all_gone(&p, &[]);
}

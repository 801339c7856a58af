//! The acceptance 5 on the lab with control planes (`up --k8s`), as root: under an
//! iperf3 run across clusters, `kill -9` the gateway, the gateway operator, the route operator
//! and the controller-manager one after the other, each started again with the same command
//! line a second later (what a kubelet does); traffic recovers (the longest interruption of a
//! TCP probe every 50 ms is printed) and the kernel state (rules, routes, nft ruleset) is
//! identical to before. Then a gateway move (its node cordoned, the gateway and its operator
//! rescheduled by the lab on another node) keeps every probe passing.
//!
//! Needs the binaries next to this test or in `$LIQO_BIN_DIR` (see `lab_k8s_root.rs`) and
//! iperf3.

use crate::lab_k8s;

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use dataplane::Netns;
use e2e::{
    lab::{
        cluster::gateway_node,
        k8s::{self, K8sLab, restart},
        outage::Prober,
    },
    topology::Topology,
};
use lab_k8s::{DownOnDrop, ONE_AT_A_TIME, fabric_state, prefix};

/// Where a pod of `to` is reached from `from`, by `from`'s TunnelEndpoint.
async fn across(k: &K8sLab, from: &str, to: &str, pod: &str) -> std::net::Ipv4Addr {
    let views = k8s::views::peerings(k).await.unwrap();
    let (_, _, v) = views
        .iter()
        .find(|(f, t, _)| f == from && t == to)
        .expect("a TunnelEndpoint");
    e2e::lab::check::translated(&k.lab, to, pod, v).unwrap()
}

fn log(k: &K8sLab, cluster: &str, what: &str) -> PathBuf {
    PathBuf::from(format!(
        "/run/liqo-lab/{}.d/{cluster}/restarted-{what}.log",
        k.lab.prefix
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fabric_process_killed_under_iperf3_recovers_and_leaves_the_kernel_as_before() {
    dataplane::netns::require_root();
    let _one = ONE_AT_A_TIME.lock().await;
    let p = prefix("f");
    let _guard = DownOnDrop(p.clone());
    let mut k = k8s::up(
        p.clone(),
        Topology::preset("two-clusters").unwrap(),
        &k8s::Options::default(),
    )
    .await
    .unwrap();
    let t = Instant::now();
    k.peer("rome", "milan").unwrap();
    k.first_cross_probe("rome", "milan", t, 60).await.unwrap();
    let t = Instant::now();
    loop {
        let m = k8s::views::check(&k).await.unwrap();
        if m.failures().is_empty() {
            break;
        }
        assert!(t.elapsed().as_secs() < 30, "{}", m.render());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let before = fabric_state(&k);

    // The load: one TCP stream from rome/n1-p1 to milan/n1-p1 for the whole run.
    let server_ns = Netns::open(&k.lab.pod_netns("milan", "n1-p1")).unwrap();
    let mut server = server_ns
        .command("iperf3")
        .args(["-s", "-p", "5203"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let target = across(&k, "rome", "milan", "n1-p1").await;
    let client = Netns::open(&k.lab.pod_netns("rome", "n1-p1"))
        .unwrap()
        .command("iperf3")
        .args(["-c", &target.to_string(), "-p", "5203", "-t", "40", "-J"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iperf3");

    let probe_to = across(&k, "rome", "milan", "n1-p0").await;
    let rome = k.lab.topology.cluster("rome").unwrap().clone();
    let gw = gateway_node(&k.lab, &rome).unwrap();
    let victims = [
        ("rome", gw.as_str(), "liqo-gateway"),
        ("rome", gw.as_str(), "liqo-gateway-operator"),
        ("rome", "n1", "liqo-route-operator"),
        ("rome", "", "liqo-controller-manager"),
    ];
    let mut figures = Vec::new();
    for (cluster, node, program) in victims {
        let prober = Prober::start(
            &k.lab.pod_netns("rome", "n1-p0"),
            &k.lab.pod_netns("milan", "n1-p0"),
            probe_to,
        )
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let killed_at = Instant::now();
        if node.is_empty() {
            let killed = e2e::liqo::kill9_component(&k.liqo, cluster, program).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            e2e::liqo::restart_component(&k.set, &mut k.liqo, killed)
                .await
                .unwrap();
        } else {
            let killed = restart::kill9(&k.lab, cluster, node, program).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            restart::restart(&killed, &log(&k, cluster, program)).unwrap();
        }
        // Until the probes answer again (or 30 s), then a little longer.
        let restarted_at = Instant::now();
        let mut answered_again = None;
        while killed_at.elapsed() < Duration::from_secs(30) {
            let ns = Netns::open(&k.lab.pod_netns("rome", "n1-p0")).unwrap();
            let ok = ns
                .run(|| {
                    std::net::TcpStream::connect_timeout(
                        &(probe_to, e2e::lab::check::ECHO_PORT).into(),
                        Duration::from_millis(200),
                    )
                    .is_ok()
                })
                .unwrap();
            if ok {
                answered_again = Some(restarted_at.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let o = prober.finish().unwrap();
        eprintln!(
            "kill -9 {program} of {cluster}{}: longest interruption {:.2} s ({} of {} probes \
             answered), restarted 1 s after the kill, answering {:.2} s after the restart",
            if node.is_empty() {
                String::new()
            } else {
                format!(" on {node}")
            },
            o.longest_gap.as_secs_f64(),
            o.answered,
            o.probes,
            answered_again.map_or(f64::NAN, |d| d.as_secs_f64())
        );
        assert!(o.up_at_end, "{program}: traffic not restored");
        figures.push((program, o.longest_gap));
    }
    let out = client.wait_with_output().unwrap();
    // The server serves one test per run; it is ours to stop.
    let _ = server.kill();
    let _ = server.wait();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "iperf3 report (exit {:?}): {e}: {}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let gbps = report
        .pointer("/end/sum_received/bits_per_second")
        .and_then(serde_json::Value::as_f64)
        .map(|b| b / 1e9);
    eprintln!(
        "iperf3 across the kills: exit {:?}, {:?} Gbit/s received on average",
        out.status.code(),
        gbps
    );
    assert!(
        out.status.success(),
        "iperf3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        gbps.is_some(),
        "no received rate in the iperf3 report: {report}"
    );

    // Every probe passes again and the kernel state is as before.
    let m = k8s::views::check(&k).await.unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
    let same = lab_k8s::eventually(30, || fabric_state(&k) == before).await;
    if !same {
        let now = fabric_state(&k);
        assert_eq!(
            before.iter().map(|(w, _)| w).collect::<Vec<_>>(),
            now.iter().map(|(w, _)| w).collect::<Vec<_>>(),
            "the same places are read before and after"
        );
        for ((what, a), (_, b)) in before.iter().zip(&now) {
            assert_eq!(a, b, "{what}: before the kills, then after");
        }
    }
    for (program, gap) in figures {
        eprintln!("{program}: {:.2} s", gap.as_secs_f64());
    }

    // A gateway move: rome's gateway node cordoned, the gateway rescheduled on n1.
    let prober = Prober::start(
        &k.lab.pod_netns("rome", "n1-p0"),
        &k.lab.pod_netns("milan", "n1-p0"),
        probe_to,
    )
    .unwrap();
    let moved = k8s::move_gateway(&k, "rome", "n1").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let o = prober.finish().unwrap();
    eprintln!(
        "moved rome's gateway from {} to {}: drained in {:.2} s, ready after {:.2} s; longest \
         interruption {:.2} s ({} of {} probes answered)",
        moved.from,
        moved.to,
        moved.stopped.as_secs_f64(),
        moved.ready.as_secs_f64(),
        o.longest_gap.as_secs_f64(),
        o.answered,
        o.probes
    );
    assert!(o.up_at_end, "traffic not restored after the move");
    assert_eq!(gateway_node(&k.lab, &rome).unwrap(), "n1");
    let client = k.set.get("rome").unwrap().client().await.unwrap();
    let n0: k8s_openapi::api::core::v1::Node = kube::Api::all(client).get(&gw).await.unwrap();
    assert_eq!(n0.spec.unwrap().unschedulable, Some(true), "{gw} cordoned");
    let t = Instant::now();
    loop {
        let m = k8s::views::check(&k).await.unwrap();
        if m.failures().is_empty() {
            break;
        }
        assert!(t.elapsed().as_secs() < 30, "{}", m.render());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

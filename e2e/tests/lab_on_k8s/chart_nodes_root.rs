//! Liqo from its chart on real nodes, as root: `liqo-lab up --k8s --real-nodes --chart` (the
//! chart's images built by `chart/images/build.sh` from this build's binaries, imported into
//! every node; `liqoctl install` on both clusters): every Liqo pod Running and Ready by its
//! probes, with the chart's ServiceAccount, on the nodes the chart puts it (the gateway and the
//! route agents on the host network); `liqoctl status` lists every component ready; the
//! gateway's network namespace is its node's (under the node's own `/run/netns`), not the
//! host's; the gateway's Service says the cluster's public address, which is on the gateway
//! pod's node. Everything is torn down by `liqo-lab down`, also when the test fails.
//!
//! It owns its clusters: the other tests' labs run Liqo as lab processes.

use std::{path::Path, time::Instant};

use crate::{
    lab_k8s::{DownOnDrop, ONE_AT_A_TIME, prefix},
    offload_lab::run,
};
use e2e::lab::{
    cluster::gateway_node,
    k8s::{K8sLab, demo, realnode},
};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Api, api::ListParams};

/// The images the lab needs, built from this build's binaries: the lab's own and the chart's.
fn build_images() {
    let bins = Path::new(env!("CARGO_BIN_EXE_liqo-lab")).parent().unwrap();
    let node = testkit::k8s::node_binaries().expect("the node binaries");
    let t = Instant::now();
    realnode::images::build(bins, &node.dir).expect("the lab's images");
    realnode::images::build_chart(bins).expect("the chart's images");
    eprintln!("TIMING images: {:.1} s", t.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liqoctl_install_runs_every_component_as_a_ready_pod_on_real_nodes() {
    dataplane::netns::require_root();
    let _one = ONE_AT_A_TIME.lock().await;
    build_images();
    let p = prefix("ch");
    let _guard = DownOnDrop(p.clone());
    let t = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-lab"))
        .args([
            "--prefix",
            p.as_str(),
            "up",
            "--k8s",
            "--real-nodes",
            "--chart",
        ])
        .output()
        .unwrap();
    eprintln!(
        "TIMING liqo-lab up --k8s --real-nodes --chart: {:.1} s\n{}",
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.status.success(),
        "up: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let k = K8sLab::load(&p).unwrap();
    for c in &k.lab.topology.clusters {
        let name = c.name.as_str();
        let client = k.client(name).await.unwrap();
        let pods = Api::<Pod>::namespaced(client.clone(), "liqo")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        eprintln!(
            "{}",
            run(
                &k,
                "kubectl",
                name,
                &["-n", "liqo", "get", "pods", "-o", "wide"]
            )
        );
        let component =
            |p: &Pod| p.metadata.labels.as_ref().unwrap()["app.kubernetes.io/component"].clone();
        let mut seen: Vec<String> = pods.iter().map(component).collect();
        seen.sort();
        // One route agent per node, one pod of every other component.
        assert_eq!(
            seen,
            [
                "auth",
                "controller-manager",
                "gateway",
                "ipam",
                "route",
                "route"
            ],
            "{name}"
        );
        for pod in &pods {
            let pname = pod.metadata.name.clone().unwrap();
            assert!(
                demo::ready(pod),
                "{name}/{pname} not Ready: {:?}",
                pod.status
            );
            let spec = pod.spec.as_ref().unwrap();
            assert!(
                spec.service_account_name
                    .as_deref()
                    .is_some_and(|sa| sa.starts_with("liqo-")),
                "{name}/{pname}: ServiceAccount {:?}",
                spec.service_account_name
            );
            let host_network = spec.host_network == Some(true);
            assert_eq!(
                host_network,
                matches!(component(pod).as_str(), "gateway" | "route"),
                "{name}/{pname}: host network"
            );
        }

        // liqoctl status: every component ready.
        let status = run(&k, "liqoctl", name, &["status"]);
        for line in [
            "Deployment/liqo-auth 1/1 ready",
            "Deployment/liqo-controller-manager 1/1 ready",
            "Deployment/liqo-gateway 1/1 ready",
            "Deployment/liqo-ipam 1/1 ready",
            "DaemonSet/liqo-route 2/2 ready",
        ] {
            assert!(status.contains(line), "{name}: no {line:?} in\n{status}");
        }

        // The gateway's namespace is its node's, and the public address is on that node.
        let gw = pods.iter().find(|p| component(p) == "gateway").unwrap();
        let node = gw.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert_eq!(
            gateway_node(&k.lab, c).unwrap(),
            node,
            "{name}: wan0's node"
        );
        let node_netns = realnode::NodePaths::of(&k.lab, c, &node)
            .netns
            .join("liqo-gateway");
        assert!(node_netns.exists(), "{name}: no {}", node_netns.display());
        let svc = Api::<Service>::namespaced(client, "liqo")
            .get("liqo-gateway")
            .await
            .unwrap();
        let ingress = svc.status.unwrap().load_balancer.unwrap().ingress.unwrap();
        assert_eq!(
            ingress[0].ip.as_deref(),
            Some(c.wan_addr.addr().to_string().as_str()),
            "{name}"
        );
    }
    assert!(
        !Path::new("/run/netns/liqo-gateway").exists(),
        "a gateway's namespace is the host's"
    );
}

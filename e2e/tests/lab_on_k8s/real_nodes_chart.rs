//! Liqo from its chart on the real nodes the main job leaves (`liqo-lab quickstart --k8s
//! --real-nodes` installs it with `liqoctl install`, the chart's images built by
//! `chart/images/build.sh` from this build's binaries and imported into every node): every Liqo
//! pod Running and Ready by its probes, with the chart's ServiceAccount, on the host network
//! where the chart says so (the gateway and the route agents); `liqoctl status` lists every
//! component ready; each of the two gateways' network namespace is its node's (under the
//! node's own `/run/netns`), not the host's; the cluster's public address is on the active
//! gateway's node, and the auth service's load balancer says it.

use std::path::Path;

use crate::offload_lab::run;
use e2e::lab::{
    cluster::gateway_node,
    k8s::{K8sLab, demo, realnode},
};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Api, api::ListParams};

/// The checks above on lab `k`.
pub(crate) async fn installed_from_chart(k: &K8sLab) {
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
                k,
                "kubectl",
                name,
                &["-n", "liqo", "get", "pods", "-o", "wide"]
            )
        );
        let component =
            |p: &Pod| p.metadata.labels.as_ref().unwrap()["app.kubernetes.io/component"].clone();
        let mut seen: Vec<String> = pods.iter().map(component).collect();
        seen.sort();
        // One route agent per node, two gateways (active and standby), one pod of every other
        // component.
        assert_eq!(
            seen,
            [
                "auth",
                "controller-manager",
                "gateway",
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
        let status = run(k, "liqoctl", name, &["status"]);
        for line in [
            "Deployment/liqo-auth 1/1 ready",
            "Deployment/liqo-controller-manager 1/1 ready",
            "Deployment/liqo-gateway 2/2 ready",
            "Deployment/liqo-ipam 1/1 ready",
            "DaemonSet/liqo-route 2/2 ready",
        ] {
            assert!(status.contains(line), "{name}: no {line:?} in\n{status}");
        }

        // Each gateway's namespace is its node's; the public address is on the active one's.
        for gw in pods.iter().filter(|p| component(p) == "gateway") {
            let node = gw.spec.as_ref().unwrap().node_name.clone().unwrap();
            let node_netns = realnode::NodePaths::of(&k.lab, c, &node)
                .netns
                .join("liqo-gateway");
            assert!(node_netns.exists(), "{name}: no {}", node_netns.display());
        }
        let active = e2e::lab::k8s::lb::active_gateway_node(&client, c)
            .await
            .unwrap()
            .expect("an active gateway");
        assert_eq!(
            gateway_node(&k.lab, c).unwrap(),
            active,
            "{name}: wan0's node"
        );
        let svc = Api::<Service>::namespaced(client, "liqo")
            .get("liqo-auth")
            .await
            .unwrap();
        let ingress = svc.status.unwrap().load_balancer.unwrap().ingress.unwrap();
        assert_eq!(
            ingress[0].ip.as_deref(),
            Some(c.wan_addr.addr().to_string().as_str()),
            "{name}: liqo-auth's load balancer"
        );
    }
    assert!(
        !Path::new("/run/netns/liqo-gateway").exists(),
        "a gateway's namespace is the host's"
    );
}

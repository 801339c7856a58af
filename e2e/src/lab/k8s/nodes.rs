//! The lab's nodes as Node objects: name = the lab node's, `spec.podCIDR` = its pod slice,
//! InternalIP = its LAN address; annotated for kwok, which keeps them Ready (its stages fill
//! addresses only when there are none, so the InternalIP set here stays: [`check`] verifies it).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};

use super::K8sLabError;
use crate::topology::Cluster;

/// How long kwok may take to make the nodes Ready.
const READY_SECS: u64 = 60;

/// The Node object of a lab node, for kwok (`kwok`) or for the kubelet that registers it (its
/// pod CIDR and address set here, which a kubelet cannot set).
pub fn object(
    name: &str,
    internal_ip: std::net::Ipv4Addr,
    pod_cidr: ipnet::Ipv4Net,
    kwok: bool,
) -> Node {
    let mut node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "type": "kwok"},
        },
        "spec": {"podCIDR": pod_cidr.to_string(), "podCIDRs": [pod_cidr.to_string()]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": internal_ip.to_string()},
                {"type": "Hostname", "address": name},
            ],
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }))
    .expect("a literal Node");
    if !kwok {
        node.metadata.annotations = None;
        if let Some(l) = node.metadata.labels.as_mut() {
            l.remove("type");
        }
        // The addresses stay (the route operator plans the overlay from them before the
        // kubelet reports its own); capacity is the kubelet's to report.
        if let Some(st) = node.status.as_mut() {
            st.allocatable = None;
            st.capacity = None;
        }
    }
    node
}

/// The InternalIP of a Node, if it has one.
pub fn internal_ip(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// Whether a Node reports Ready.
pub fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What is wrong with the Nodes of `c` as read back, if anything: a lab node without its
/// object, not Ready, or with another InternalIP or pod CIDR.
pub fn check(c: &Cluster, found: &[Node]) -> Option<String> {
    for n in &c.nodes {
        let name = n.name.as_str();
        let Some(obj) = found
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some(name))
        else {
            return Some(format!("no Node {name}"));
        };
        let want_ip = n.lan_addr.addr().to_string();
        if internal_ip(obj).as_deref() != Some(want_ip.as_str()) {
            return Some(format!(
                "Node {name} has InternalIP {:?}, not {want_ip}",
                internal_ip(obj)
            ));
        }
        let cidr = obj.spec.as_ref().and_then(|s| s.pod_cidr.clone());
        if cidr.as_deref() != Some(n.pod_slice.to_string().as_str()) {
            return Some(format!(
                "Node {name} has podCIDR {cidr:?}, not {}",
                n.pod_slice
            ));
        }
        if !ready(obj) {
            return Some(format!("Node {name} is not Ready"));
        }
    }
    None
}

/// Creates the Node objects of `c`; for kwok (`kwok`), waits until it made them Ready with the
/// addresses kept (real nodes are Ready once their kubelets run).
pub async fn create(client: &Client, c: &Cluster, kwok: bool) -> Result<(), K8sLabError> {
    let api: Api<Node> = Api::all(client.clone());
    for n in &c.nodes {
        let obj = object(n.name.as_str(), n.lan_addr.addr(), n.pod_slice, kwok);
        api.create(&PostParams::default(), &obj)
            .await
            .map_err(K8sLabError::kube(format!(
                "creating Node {} of {}",
                n.name, c.name
            )))?;
    }
    if !kwok {
        return Ok(());
    }
    wait_ready(client, c, READY_SECS).await
}

/// Waits up to `secs` until every Node of `c` is Ready with its InternalIP and pod CIDR.
pub async fn wait_ready(client: &Client, c: &Cluster, secs: u64) -> Result<(), K8sLabError> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let found = api
            .list(&ListParams::default())
            .await
            .map_err(K8sLabError::kube(format!(
                "listing the Nodes of {}",
                c.name
            )))?;
        let Some(why) = check(c, &found.items) else {
            return Ok(());
        };
        if Instant::now() > deadline {
            return Err(K8sLabError::lab(
                format!("waiting {secs} s for the Nodes of {}", c.name),
                why,
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until Node `name` exists and is Ready (at most `within`; a virtual node appears
/// once a peering's resources are accepted); how long it took.
pub async fn wait_named(
    client: &Client,
    name: &str,
    within: Duration,
) -> Result<Duration, K8sLabError> {
    let api: Api<Node> = Api::all(client.clone());
    let t = Instant::now();
    loop {
        let node = api
            .get_opt(name)
            .await
            .map_err(K8sLabError::kube(format!("reading Node {name}")))?;
        if node.as_ref().is_some_and(ready) {
            return Ok(t.elapsed());
        }
        if t.elapsed() > within {
            let state = if node.is_some() {
                "not Ready"
            } else {
                "absent"
            };
            return Err(K8sLabError::lab(
                format!("waiting {} s for Node {name}", within.as_secs()),
                format!("it is {state}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn a_node_object_carries_the_lab_address_and_slice() {
        let topo = Topology::preset("two-clusters").unwrap();
        let c = &topo.clusters[0];
        let mut objs: Vec<Node> = c
            .nodes
            .iter()
            .map(|n| object(n.name.as_str(), n.lan_addr.addr(), n.pod_slice, true))
            .collect();
        // Not Ready yet.
        assert!(check(c, &objs).unwrap().contains("not Ready"));
        for o in &mut objs {
            o.status.as_mut().unwrap().conditions = Some(vec![
                serde_json::from_value(serde_json::json!({"type": "Ready", "status": "True"}))
                    .unwrap(),
            ]);
        }
        assert_eq!(check(c, &objs), None);
        assert_eq!(
            internal_ip(&objs[0]).unwrap(),
            c.nodes[0].lan_addr.addr().to_string()
        );
        objs[1].status.as_mut().unwrap().addresses = None;
        let e = check(c, &objs).unwrap();
        assert!(e.contains("InternalIP None"), "{e}");
        objs.pop();
        assert!(check(c, &objs).unwrap().starts_with("no Node"));
    }
}

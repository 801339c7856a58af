//! The lab's load balancer and Internet egress for Liqo from its chart ([`super::chart`]), as a
//! cloud gives them to a cluster: the cluster's public address (its link `wan0`) sits on the
//! node of the gateway's pod ([`follow_gateway`]), where peers reach the gateway's UDP port
//! (the chart's `gateway.config.endpointOverride`), and the LoadBalancer Services say that
//! address: `liqo-auth`'s and the API server's ([`API_SERVICE`], a Service without selector
//! whose endpoint is the API node's relay). kube-proxy on that node translates what arrives
//! there to the Services' endpoints, as for any load-balancer address.
//! The other nodes route the WAN through it, and it masquerades what leaves by `wan0` but the
//! gateway's own traffic (from the public address), so that pods reach the peers' public
//! addresses.

use std::net::Ipv4Addr;

use dataplane::{Netlink, Netns, nft, route::RouteSpec};
use ipnet::IpNet;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Pod, Service},
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};

use super::K8sLabError;
use crate::{
    k8s::MANAGER,
    lab::{Lab, state, wan},
    liqo::NAMESPACE,
    topology::Cluster,
};

/// The Service (in `default`) peers reach the API server through.
pub const API_SERVICE: &str = "liqo-lab-apiserver";
/// Its port: peers reach the API server at `https://<public address>:6443`.
pub const API_PORT: u16 = 6443;
/// The label selecting the gateway's pods (the chart's `liqo.selectorLabels`).
const GATEWAY_PODS: &str = "app.kubernetes.io/component=gateway";
/// The gateway's Deployment and container (the chart's).
const GATEWAY_DEPLOYMENT: &str = "liqo-gateway";
const GATEWAY_CONTAINER: &str = "gateway";
/// The nftables table of the egress (on `wan0`'s node).
const TABLE: &str = "lab_egress";

/// The API server's URL for peers.
pub fn api_url(c: &Cluster) -> String {
    format!("https://{}:{API_PORT}", c.wan_addr.addr())
}

/// The Service peers reach the API server through: its endpoint the API node's relay
/// (`relay_addr`:`relay_port`), its load-balancer address the cluster's public one.
pub async fn api_service(
    client: &Client,
    c: &Cluster,
    relay_addr: Ipv4Addr,
    relay_port: u16,
) -> Result<(), K8sLabError> {
    let what = |s: &str| format!("{s} {API_SERVICE} of {}", c.name);
    let svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": API_SERVICE, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": "https", "port": API_PORT, "targetPort": relay_port, "protocol": "TCP"},
        ]},
    }))
    .expect("a literal Service");
    let pp = PatchParams::apply(MANAGER).force();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services
        .patch(API_SERVICE, &pp, &Patch::Apply(&svc))
        .await
        .map_err(K8sLabError::kube(what("applying Service")))?;
    let slice = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": API_SERVICE, "namespace": "default",
                     "labels": {"kubernetes.io/service-name": API_SERVICE,
                                "endpointslice.kubernetes.io/managed-by": MANAGER}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [relay_addr.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": relay_port, "protocol": "TCP"}],
    });
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), "default");
    slices
        .patch(API_SERVICE, &pp, &Patch::Apply(&slice))
        .await
        .map_err(K8sLabError::kube(what("applying the EndpointSlice of")))?;
    ingress(client, c, "default", API_SERVICE).await
}

/// Writes the cluster's public address into the load-balancer status of Service `ns/name`.
async fn ingress(client: &Client, c: &Cluster, ns: &str, name: &str) -> Result<(), K8sLabError> {
    let status = serde_json::json!({"status": {"loadBalancer": {"ingress": [
        {"ip": c.wan_addr.addr().to_string()},
    ]}}});
    Api::<Service>::namespaced(client.clone(), ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(K8sLabError::kube(format!(
            "writing the load-balancer status of {ns}/{name} of {}",
            c.name
        )))?;
    Ok(())
}

/// A gateway pod as the lab sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayPod {
    /// Its name.
    pub name: String,
    /// Its node (empty while unscheduled).
    pub node: String,
    /// Whether it is labelled the active one (two replicas).
    pub active: bool,
    /// Whether it is Ready.
    pub ready: bool,
    /// Restarts of its gateway container.
    pub restarts: i32,
}

/// The gateway pods of `c`.
pub async fn gateway_pods(client: &Client, c: &Cluster) -> Result<Vec<GatewayPod>, K8sLabError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels(GATEWAY_PODS))
        .await
        .map_err(K8sLabError::kube(format!(
            "listing the gateway pods of {}",
            c.name
        )))?;
    Ok(list
        .items
        .iter()
        .map(|p| GatewayPod {
            name: p.metadata.name.clone().unwrap_or_default(),
            node: p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            active: p.metadata.labels.as_ref().is_some_and(|l| {
                l.get(control::consts::net::GATEWAY_ACTIVE_LABEL)
                    .is_some_and(|v| v == control::consts::values::TRUE)
            }),
            ready: super::demo::ready(p),
            restarts: p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == GATEWAY_CONTAINER))
                .map_or(0, |c| c.restart_count),
        })
        .collect())
}

/// The node of the active gateway pod of `c`: with one replica its pod's, with two the one
/// labelled active; `None` while there is none (a failover, a pod not yet scheduled).
pub async fn active_gateway_node(
    client: &Client,
    c: &Cluster,
) -> Result<Option<String>, K8sLabError> {
    let replicas = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get(GATEWAY_DEPLOYMENT)
        .await
        .map_err(K8sLabError::kube(format!(
            "reading Deployment {GATEWAY_DEPLOYMENT} of {}",
            c.name
        )))?
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let pods = gateway_pods(client, c).await?;
    let active = if replicas == 1 {
        pods.first().filter(|_| pods.len() == 1)
    } else {
        pods.iter().find(|p| p.active)
    };
    Ok(active.map(|p| p.node.clone()).filter(|n| !n.is_empty()))
}

/// Puts the public address of `c` on `node` with its egress (the other nodes' WAN through
/// it); whether it moved.
pub async fn place(lab: &Lab, c: &Cluster, node: &str) -> Result<bool, K8sLabError> {
    let from = wan0_node(lab, c).await?;
    let moved = from != node;
    if moved {
        wan::relocate(lab, c, &lab.node(c, &from)?, &lab.node(c, node)?).await?;
    }
    state::write_atomic(&lab.files(c).gateway_node(), node)?;
    egress(lab, c, node).await?;
    Ok(moved)
}

/// The node `wan0` of `c` is in, looked for in every node (a move that failed half-way left
/// the recorded node stale).
async fn wan0_node(lab: &Lab, c: &Cluster) -> Result<String, K8sLabError> {
    for n in &c.nodes {
        if wan::is_in(&lab.node(c, n.name.as_str())?).await? {
            return Ok(n.name.to_string());
        }
    }
    Err(K8sLabError::lab(
        format!("the public link of {}", c.name),
        format!("{} is in none of its nodes", wan::WAN0),
    ))
}

/// Puts the public address on the node of the (active) gateway pod and writes it into the
/// load-balancer status of the auth service's Service (once, at install).
pub async fn follow_gateway(lab: &Lab, c: &Cluster, client: &Client) -> Result<(), K8sLabError> {
    let node = active_gateway_node(client, c).await?.ok_or_else(|| {
        K8sLabError::lab(
            format!("the gateway of {}", c.name),
            "no gateway pod scheduled",
        )
    })?;
    place(lab, c, &node).await?;
    ingress(client, c, NAMESPACE, control::consts::objects::AUTH_SERVICE).await
}

/// How often the balancer looks at the gateway's pods.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// The load balancer of `c` as a process (`liqo-lab balance`, started by the lab with two
/// gateway replicas): whenever another gateway pod becomes the active one, the public address
/// moves to its node, as a cloud's load balancer sends to the Service's ready endpoint. Runs
/// until killed; a failed look is logged and retried.
pub async fn balance(lab: &Lab, c: &Cluster, client: &Client) -> ! {
    loop {
        let look = async {
            match active_gateway_node(client, c).await? {
                Some(node) => place_if_moved(lab, c, &node).await,
                None => Ok(()),
            }
        };
        if let Err(e) = look.await {
            tracing::warn!(cluster = %c.name, error = %liqo_types::chain(&e), "following the gateway");
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

async fn place_if_moved(lab: &Lab, c: &Cluster, node: &str) -> Result<(), K8sLabError> {
    let from = wan0_node(lab, c).await?;
    if from != node {
        let t = std::time::Instant::now();
        place(lab, c, node).await?;
        tracing::info!(cluster = %c.name, %from, to = %node, took_ms = t.elapsed().as_millis() as u64, "the public address moved to the active gateway");
    }
    Ok(())
}

/// The WAN through node `holder` (where `wan0` is) for every node of `c`.
async fn egress(lab: &Lab, c: &Cluster, holder: &str) -> Result<(), K8sLabError> {
    let fail = |what: String| move |e: dataplane::netlink::Error| K8sLabError::lab(what, e);
    let via = c
        .node(holder)
        .ok_or_else(|| K8sLabError::lab(format!("node {holder} of {}", c.name), "not in the lab"))?
        .lan_addr
        .addr();
    let wan = lab.topology.wan_cidr;
    for n in &c.nodes {
        let ns: Netns = lab.node(c, n.name.as_str())?;
        let nl = Netlink::connect_in(&ns).map_err(fail(format!("netlink in {}", ns.name())))?;
        let table = TABLE.parse().expect("literal");
        if n.name == holder {
            // Its route to the WAN through the node that held wan0 before goes: it would win
            // over wan0's own.
            let main = 254;
            for r in nl
                .routes(main)
                .await
                .map_err(fail(format!("listing the routes in {}", ns.name())))?
                .into_iter()
                .filter(|r| {
                    r.dst == IpNet::V4(wan)
                        && c.nodes
                            .iter()
                            .any(|o| r.via == Some(o.lan_addr.addr().into()))
                })
            {
                nl.delete_route(&r)
                    .await
                    .map_err(fail(format!("deleting route {r} in {}", ns.name())))?;
            }
            let own = if c.behind_nat {
                wan::nat_lan_node().addr()
            } else {
                c.wan_addr.addr()
            };
            nft::apply(
                Some(&ns),
                &crate::lab::build::masquerade_table(TABLE, wan::WAN0, Some(own)),
            )
            .map_err(|e| K8sLabError::lab(format!("the egress NAT in {}", ns.name()), e))?;
        } else {
            let route = RouteSpec {
                via: Some(via.into()),
                ..RouteSpec::to(IpNet::V4(wan))
            };
            nl.replace_route(&route)
                .await
                .map_err(fail(format!("route {route} in {}", ns.name())))?;
            // Where wan0 was before, its NAT goes (absent: nothing to do).
            if nft::tables(Some(&ns))
                .map_err(|e| K8sLabError::lab(format!("nftables in {}", ns.name()), e))?
                .iter()
                .any(|(f, t)| *f == nft::Family::Ip && *t == table)
            {
                nft::delete(Some(&ns), nft::Family::Ip, &table).map_err(|e| {
                    K8sLabError::lab(format!("removing the egress NAT in {}", ns.name()), e)
                })?;
            }
        }
    }
    Ok(())
}

//! The data plane of a lab cluster in Kubernetes mode: the gateway's Service, a relay per node
//! ([`super::relay`]), and, as a DaemonSet and a Deployment would run them with host
//! networking, the route operator on every node and the gateway operator on the gateway node,
//! each with its own ServiceAccount token (the chart's RBAC) reaching the API server through
//! the node's relay. The operators render the daemons' files over the lab's base files (fixed
//! settings, no peers); the lab starts `liqo-gateway` and `liqo-overlay` once their files are
//! there, in the node namespaces, exactly as without Kubernetes.

use std::{
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use control::consts::{net, values};
use dataplane::supervisor::{self, Proc, Spec};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use liqo_peering::{Peerings, plan};

use super::{
    K8sLabError,
    relay::{self, API_LISTEN, IPAM_LISTEN},
};
use crate::{
    k8s::{self, MANAGER},
    lab::{
        Lab,
        cluster::{id, overlay_nodes},
        daemons::{self, GATEWAY_PORT, GATEWAY_STATUS, OVERLAY_STATUS},
        names, overlay,
    },
    liqo::{self, NAMESPACE},
    topology::Cluster,
};

/// The gateway operator's program (and ServiceAccount, and ClusterRole).
pub const GATEWAY_OPERATOR: &str = "liqo-gateway-operator";
/// The route operator's program (and ServiceAccount, and ClusterRole).
pub const ROUTE_OPERATOR: &str = "liqo-route-operator";
/// The gateway's Service.
pub const GATEWAY_SERVICE: &str = "liqo-gateway";
/// Where the gateway operator serves its metrics, inside its node.
const GATEWAY_OPERATOR_METRICS: &str = "127.0.0.1:9110";
/// Where a route operator serves its metrics, inside its node.
const ROUTE_OPERATOR_METRICS: &str = "127.0.0.1:9111";
/// How long an operator may take to render its first file.
const RENDER_SECS: u64 = 30;

/// The lab's files of a cluster in Kubernetes mode, next to the daemons' own.
pub struct Paths(PathBuf);

impl Paths {
    /// The files of cluster `c` of `lab`.
    pub fn of(lab: &Lab, c: &Cluster) -> Paths {
        Paths(lab.files(c).dir().to_owned())
    }
    /// The gateway's base file (its fixed settings; no peers).
    pub fn gateway_base(&self) -> PathBuf {
        self.0.join("gateway-base.yaml")
    }
    /// The base file of the overlay agent of `node`.
    pub fn overlay_base(&self, node: &str) -> PathBuf {
        self.0.join(format!("overlay-base-{node}.yaml"))
    }
    /// The log of a node-side process (`<what>-<node>.log`).
    pub fn log(&self, what: &str, node: &str) -> PathBuf {
        self.0.join(format!("{what}-{node}.log"))
    }
    /// The tag of the relay of `node` (in its command line: teardown finds it by it).
    pub fn relay_tag(&self, node: &str) -> PathBuf {
        self.0.join(format!("relay-{node}"))
    }
}

/// Starts the data plane of `c` (harness cluster `kc`, Liqo `installed`) and waits until the
/// gateway and every overlay agent serve.
pub async fn start(
    lab: &Lab,
    c: &Cluster,
    kc: &k8s::Cluster,
    installed: &liqo::Installed,
    opts: &super::Options,
) -> Result<(), K8sLabError> {
    let client = kc.client().await?;
    gateway_service(&client, c).await?;
    let paths = Paths::of(lab, c);
    let files = lab.files(c);
    let ipam = installed
        .get("liqo-ipam")
        .and_then(|r| r.listen.as_deref())
        .ok_or_else(|| K8sLabError::lab(format!("the IPAM of {}", c.name), "not running"))?
        .parse::<SocketAddr>()
        .map_err(|e| K8sLabError::lab(format!("the IPAM address of {}", c.name), e))?;
    relays(lab, c, kc, Some(ipam), opts.real_nodes).await?;

    // The base files: what the lab itself runs with no peer.
    let gw_node = c.gateway().name.to_string();
    let base = gateway_base(lab, c);
    let text = serde_saphyr::to_string(&base)
        .map_err(|e| K8sLabError::lab("encoding a gateway base", e))?;
    daemons::write_config(&paths.gateway_base(), &text)?;
    let overlay_plan = plan::overlay(&id(c), &overlay_nodes(c), &gw_node, &Peerings::new())
        .map_err(|e| K8sLabError::lab(format!("planning the overlay of {}", c.name), e))?;
    for n in overlay_plan.per_node() {
        // The route operator fills in the nodes, the gateway's node and the ranges.
        let base = ::overlay::config::File {
            nodes: Vec::new(),
            remote_cidrs: Vec::new(),
            ..overlay::config(&n)
        };
        let text = serde_saphyr::to_string(&base)
            .map_err(|e| K8sLabError::lab("encoding an overlay base", e))?;
        daemons::write_config(&paths.overlay_base(&n.node), &text)?;
        if !opts.operators {
            let text = serde_saphyr::to_string(&overlay::config(&n))
                .map_err(|e| K8sLabError::lab("encoding an overlay config", e))?;
            daemons::write_config(&files.overlay_config(&n.node), &text)?;
        }
    }

    if opts.operators {
        let dir = installed.dir.join("node");
        std::fs::create_dir_all(&dir)
            .map_err(|e| K8sLabError::lab(format!("creating {}", dir.display()), e))?;
        let server = format!("https://{API_LISTEN}");
        let mut kubeconfigs = Vec::new();
        for sa in [GATEWAY_OPERATOR, ROUTE_OPERATOR] {
            kubeconfigs.push(liqo::service_account(&client, kc, sa, &dir, Some(&server)).await?);
        }
        let gw_op = spawn_gateway_operator(lab, c, &gw_node, &kubeconfigs[0])?;
        let mut route_ops = Vec::new();
        for n in &c.nodes {
            route_ops.push((
                n.name.to_string(),
                spawn_route_operator(lab, c, n.name.as_str(), &kubeconfigs[1])?,
            ));
        }
        wait_file(&files.gateway_config(), &gw_op).await?;
        for (node, p) in &route_ops {
            wait_file(&files.overlay_config(node), p).await?;
        }
    } else {
        std::fs::copy(paths.gateway_base(), files.gateway_config())
            .map_err(|e| K8sLabError::lab("copying the gateway base", e))?;
    }

    let p = daemons::spawn_gateway(lab, c, &gw_node)?;
    daemons::gateway_up(lab, c, &lab.node(c, &gw_node)?, &p).await?;
    for n in &c.nodes {
        let node = n.name.as_str();
        let p = daemons::spawn_overlay(lab, c, node)?;
        let ns = lab.node(c, node)?;
        let log = files.overlay_log(node);
        daemons::wait_for(
            20,
            &format!("the overlay agent on {}/{node}", c.name),
            || {
                if !supervisor::alive(p.pid) {
                    return daemons::Poll::Failed(crate::lab::LabError::build(
                        format!(
                            "the overlay agent on {}/{node} exited; the end of {}",
                            c.name,
                            log.display()
                        ),
                        supervisor::tail(&log, 10),
                    ));
                }
                match daemons::overlay_status(&ns) {
                    Ok(_) => daemons::Poll::Ready(()),
                    Err(e) => daemons::Poll::NotYet(e.to_string()),
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// Starts a relay in every node of `c` (to the API server, and to the IPAM at `ipam` if
/// given; with `real_nodes`, the API node's also carries the API server's way into the lab)
/// and waits until each listens.
pub async fn relays(
    lab: &Lab,
    c: &Cluster,
    kc: &k8s::Cluster,
    ipam: Option<SocketAddr>,
    real_nodes: bool,
) -> Result<(), K8sLabError> {
    let paths = Paths::of(lab, c);
    let dir = lab.files(c).dir().to_owned();
    std::fs::create_dir_all(&dir)
        .map_err(|e| K8sLabError::lab(format!("creating {}", dir.display()), e))?;
    let api = loopback_port(&kc.server)?;
    for n in &c.nodes {
        let node = n.name.as_str();
        let ns = lab.node_netns(c.name.as_str(), node);
        let forwards = relay::forwards(c, n, api, ipam);
        // The API node also carries the API server's way into the lab, with real nodes.
        let egress = (real_nodes && n.name == relay::api_node(c).name)
            .then(|| super::realnode::egress_socket(lab, c));
        let p = relay::spawn(
            &ns,
            &forwards,
            egress.as_deref(),
            &paths.relay_tag(node),
            &paths.log("relay", node),
        )?;
        wait_listening(lab, c, node, &p, API_LISTEN).await?;
    }
    Ok(())
}

/// Waits until something listens at `addr` inside `node` (the relay bound it), or its process
/// exited.
async fn wait_listening(
    lab: &Lab,
    c: &Cluster,
    node: &str,
    p: &Proc,
    addr: &str,
) -> Result<(), K8sLabError> {
    let what = format!("the relay of {}/{node}", c.name);
    let addr: SocketAddr = addr.parse().expect("literal");
    listening(&lab.node(c, node)?, p, addr, Duration::from_secs(10), &what).await
}

/// The Service peers reach the gateway at: a LoadBalancer (no selector: the gateway is a lab
/// process) whose status says the cluster's public address, as a cloud would write it.
async fn gateway_service(client: &Client, c: &Cluster) -> Result<(), K8sLabError> {
    let api: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": GATEWAY_SERVICE, "namespace": NAMESPACE,
                     "labels": {net::GATEWAY_SERVICE_LABEL: values::TRUE}},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": "wireguard", "port": GATEWAY_PORT, "targetPort": GATEWAY_PORT, "protocol": "UDP"},
        ]},
    }))
    .expect("a literal Service");
    api.patch(
        GATEWAY_SERVICE,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&svc),
    )
    .await
    .map_err(K8sLabError::kube(format!(
        "applying Service {GATEWAY_SERVICE}"
    )))?;
    let status = serde_json::json!({"status": {"loadBalancer": {"ingress": [
        {"ip": c.wan_addr.addr().to_string()},
    ]}}});
    api.patch_status(
        GATEWAY_SERVICE,
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .map_err(K8sLabError::kube(format!(
        "writing the load-balancer status of {GATEWAY_SERVICE}"
    )))?;
    Ok(())
}

/// The port of `https://127.0.0.1:<port>` (the harness's API servers listen on loopback).
pub(crate) fn loopback_port(server: &str) -> Result<SocketAddr, K8sLabError> {
    server
        .strip_prefix("https://")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            K8sLabError::lab(
                format!("the API server address {server:?}"),
                "not https://<ip>:<port>",
            )
        })
}

/// Waits up to `within` until something listens at `addr` inside `ns`, or `p` (`what`)
/// exited.
pub(crate) async fn listening(
    ns: &dataplane::Netns,
    p: &Proc,
    addr: SocketAddr,
    within: Duration,
    what: &str,
) -> Result<(), K8sLabError> {
    let deadline = Instant::now() + within;
    loop {
        let ok = ns
            .run(|| TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())
            .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if !supervisor::alive(p.pid) || Instant::now() > deadline {
            return Err(K8sLabError::lab(
                format!("{what} at {addr}; the end of {}", p.log),
                supervisor::tail(Path::new(&p.log), 10),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `file` exists (an operator rendered it), or `p` exited.
async fn wait_file(file: &Path, p: &Proc) -> Result<(), K8sLabError> {
    let deadline = Instant::now() + Duration::from_secs(RENDER_SECS);
    loop {
        if file.is_file() {
            return Ok(());
        }
        let dead = !supervisor::alive(p.pid);
        if dead || Instant::now() > deadline {
            return Err(K8sLabError::lab(
                format!(
                    "{} did not render {} ({}); the end of {}",
                    p.name,
                    file.display(),
                    if dead { "it exited" } else { "timed out" },
                    p.log
                ),
                supervisor::tail(Path::new(&p.log), 15),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn operator_spec(
    lab: &Lab,
    c: &Cluster,
    node: &str,
    program: &'static str,
    kubeconfig: &Path,
) -> Result<Spec, K8sLabError> {
    let bin =
        crate::lab::bin(program).map_err(|e| K8sLabError::lab(format!("finding {program}"), e))?;
    Ok(
        Spec::new(program, bin, Paths::of(lab, c).log(program, node))
            .env("RUST_LOG", "info")
            .env("KUBECONFIG", kubeconfig)
            .netns(&lab.node(c, node)?)
            .args(["--namespace", NAMESPACE, "--node-name", node]),
    )
}

pub(crate) fn spawn_gateway_operator(
    lab: &Lab,
    c: &Cluster,
    node: &str,
    kubeconfig: &Path,
) -> Result<Proc, K8sLabError> {
    let (paths, files) = (Paths::of(lab, c), lab.files(c));
    operator_spec(lab, c, node, GATEWAY_OPERATOR, kubeconfig)?
        .args(["--base-config"])
        .args([paths.gateway_base()])
        .args(["--config"])
        .args([files.gateway_config()])
        .args(["--private-key-file"])
        .args([files.private_key()])
        .args([
            "--gateway-status-url".to_owned(),
            format!("http://{GATEWAY_STATUS}/status"),
            "--ipam-address".to_owned(),
            format!("http://{IPAM_LISTEN}"),
            "--metrics-listen".to_owned(),
            GATEWAY_OPERATOR_METRICS.to_owned(),
        ])
        .detached()
        .map_err(|e| {
            K8sLabError::lab(
                format!("starting {GATEWAY_OPERATOR} on {}/{node}", c.name),
                e,
            )
        })
}

fn spawn_route_operator(
    lab: &Lab,
    c: &Cluster,
    node: &str,
    kubeconfig: &Path,
) -> Result<Proc, K8sLabError> {
    let (paths, files) = (Paths::of(lab, c), lab.files(c));
    operator_spec(lab, c, node, ROUTE_OPERATOR, kubeconfig)?
        .args(["--base-config"])
        .args([paths.overlay_base(node)])
        .args(["--config"])
        .args([files.overlay_config(node)])
        .args([
            "--overlay-status-url".to_owned(),
            format!("http://{OVERLAY_STATUS}/status"),
            "--metrics-listen".to_owned(),
            ROUTE_OPERATOR_METRICS.to_owned(),
        ])
        .detached()
        .map_err(|e| K8sLabError::lab(format!("starting {ROUTE_OPERATOR} on {}/{node}", c.name), e))
}

/// The gateway's fixed settings (as the lab's own gateway has them) and no peer: what the
/// gateway operator renders the peers, the external CIDR and the endpoints over.
fn gateway_base(lab: &Lab, c: &Cluster) -> gateway::config::File {
    gateway::config::File {
        namespace: Some(names::netns(&lab.prefix, &[c.name.as_str(), "gw"]).to_string()),
        private_key_file: Some(lab.files(c).private_key().display().to_string()),
        local_pod_cidr: Some(liqo_types::Cidr::new(c.pod_cidr).expect("validated topology")),
        listen_port: Some(GATEWAY_PORT),
        ..Default::default()
    }
}

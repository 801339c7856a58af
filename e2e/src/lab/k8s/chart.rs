//! Liqo from its chart on a lab with real nodes (`liqo-lab up --k8s --real-nodes --chart`):
//! `liqoctl install` on every cluster (at the same time), so every component is a pod on the
//! real nodes, from the chart's images imported into each node
//! ([`super::realnode::images::build_chart`]), with the chart's ServiceAccounts, security
//! contexts, probes and mounts. Nothing of Liqo runs as a lab process. The lab stands in for the
//! cloud's load balancers and Internet egress ([`super::lb`]): peers reach the gateway, the
//! auth service and the API server at the cluster's public address, and for their disks
//! ([`super::volumes`]: the storage fabric's real class).

use std::{path::Path, process::Stdio, time::Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use super::{K8sLabError, fabric, lb, realnode::images, relay, volumes};
use crate::{
    k8s::{self, Binaries, Clusters},
    lab::Lab,
    liqo::{self, Installed, Liqo, NAMESPACE},
    topology::Cluster,
};

/// Installs Liqo with `liqoctl install` on every cluster of `lab` (harness `set`) and records
/// it; each install's output is in `liqoctl-install.log` in the cluster's lab directory.
/// With two gateway replicas, a load balancer per cluster follows the active one
/// ([`lb::balance`], a `liqo-lab balance` process teardown finds by its `--tag`).
pub async fn install(
    lab: &Lab,
    set: &Clusters,
    bins: &Binaries,
    gateway_replicas: u8,
) -> Result<Liqo, K8sLabError> {
    let liqoctl = crate::lab::bin("liqoctl")
        .map_err(|e| K8sLabError::lab("installing Liqo from its chart", e))?;
    for c in &lab.topology.clusters {
        let kc = set.get(c.name.as_str()).expect("one per lab cluster");
        let api = fabric::loopback_port(&kc.server)?;
        let client = kc.client().await?;
        lb::api_service(&client, c, relay::api_node(c).lan_addr.addr(), api.port()).await?;
        volumes::create(lab, c, &client).await?;
    }
    let t = Instant::now();
    let runs = lab.topology.clusters.iter().map(|c| {
        let kc = set.get(c.name.as_str()).expect("one per lab cluster");
        run_install(lab, c, kc, bins, &liqoctl, gateway_replicas)
    });
    for r in futures::future::join_all(runs).await {
        r?;
    }
    println!(
        "Liqo installed from its chart on {} in {:.0} s",
        lab.topology
            .clusters
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(" and "),
        t.elapsed().as_secs_f64()
    );
    let mut installed = Vec::new();
    for c in &lab.topology.clusters {
        let kc = set.get(c.name.as_str()).expect("one per lab cluster");
        let client = kc.client().await?;
        lb::follow_gateway(lab, c, &client).await?;
        installed.push(Installed {
            cluster: c.name.to_string(),
            cluster_id: cluster_id(&client, c).await?,
            dir: kc.dir.join("liqo"),
            kubeconfigs: Default::default(),
            auth_url: None,
            running: Vec::new(),
        });
    }
    let liqo = liqo::record_pods(set, bins, installed)
        .map_err(|e| K8sLabError::lab("recording Liqo installed from its chart", e))?;
    if gateway_replicas > 1 {
        for c in &lab.topology.clusters {
            spawn_balancer(lab, c)?;
        }
    }
    Ok(liqo)
}

/// Starts `liqo-lab balance` for `c` (detached; its `--tag`, under the lab's directory, is
/// how teardown finds it).
fn spawn_balancer(lab: &Lab, c: &Cluster) -> Result<(), K8sLabError> {
    let program = crate::lab::bin("liqo-lab")
        .map_err(|e| K8sLabError::lab("finding liqo-lab for the load balancer", e))?;
    let dir = lab.files(c).dir().to_owned();
    dataplane::supervisor::Spec::new("liqo-lab", program, dir.join("balance.log"))
        .env("RUST_LOG", "info")
        .args([
            "--prefix",
            lab.prefix.as_str(),
            "balance",
            "--cluster",
            c.name.as_str(),
        ])
        .args(["--tag".as_ref(), dir.join("balance").as_os_str()])
        .detached()
        .map(drop)
        .map_err(|e| K8sLabError::lab(format!("starting the load balancer of {}", c.name), e))
}

/// `liqoctl install` on `c` with the lab's images (never pulled), its CIDRs and reserved
/// subnets.
async fn run_install(
    lab: &Lab,
    c: &Cluster,
    kc: &k8s::Cluster,
    bins: &Binaries,
    liqoctl: &Path,
    gateway_replicas: u8,
) -> Result<(), K8sLabError> {
    let log_path = lab.files(c).dir().join("liqoctl-install.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| K8sLabError::lab(format!("creating {}", log_path.display()), e))?;
    let err = log
        .try_clone()
        .map_err(|e| K8sLabError::lab(format!("opening {}", log_path.display()), e))?;
    let mut cmd = tokio::process::Command::new(liqoctl);
    cmd.env("KUBECONFIG", &kc.kubeconfig)
        .env("HELM", bins.path("helm"))
        .args(["install", "--cluster-name", c.name.as_str()])
        .args(["--pod-cidr", &c.pod_cidr.to_string()])
        .args(["--service-cidr", &c.service_cidr.to_string()])
        .args(["--api-server-url", &lb::api_url(c)])
        .args(["--timeout", "5m"])
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err));
    if !c.reserved_subnets.is_empty() {
        let list: Vec<String> = c.reserved_subnets.iter().map(|n| n.to_string()).collect();
        cmd.args(["--reserved-subnets", &list.join(",")]);
    }
    for set in [
        format!("image.registry={}", images::REGISTRY),
        format!("image.repositoryPrefix={}", images::PREFIX),
        format!("tag={}", images::TAG),
        "pullPolicy=Never".to_owned(),
        // The public address is on the gateway's node (wan0 follows the gateway): peers reach
        // the gateway's own UDP port there, not a load balancer's address kube-proxy would
        // translate (its NAT of the gateway's own traffic clashes with it).
        "gateway.service.type=NodePort".to_owned(),
        format!("gateway.replicas={gateway_replicas}"),
        // The storage fabric over the lab's static volumes.
        "storage.enable=true".to_owned(),
        format!("storage.realStorageClassName={}", volumes::CLASS),
        format!(
            "gateway.config.endpointOverride.address={}",
            c.wan_addr.addr()
        ),
        format!(
            "gateway.config.endpointOverride.port={}",
            crate::lab::daemons::GATEWAY_PORT
        ),
    ] {
        cmd.args(["--set", &set]);
    }
    println!(
        "Installing Liqo on {} from its chart (liqoctl install)",
        c.name
    );
    let status = cmd
        .status()
        .await
        .map_err(|e| K8sLabError::lab(format!("running {}", liqoctl.display()), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(K8sLabError::lab(
            format!("liqoctl install on {}", c.name),
            format!(
                "exited {status}; the end of {}:\n{}",
                log_path.display(),
                dataplane::supervisor::tail(&log_path, 15)
            ),
        ))
    }
}

/// The cluster ID the install made.
async fn cluster_id(client: &Client, c: &Cluster) -> Result<String, K8sLabError> {
    use control::consts::{keys, objects};
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .get(objects::CLUSTER_ID_CONFIGMAP)
        .await
        .map_err(K8sLabError::kube(format!(
            "reading the cluster ID of {}",
            c.name
        )))?;
    cm.data
        .and_then(|d| d.get(keys::CLUSTER_ID).cloned())
        .ok_or_else(|| {
            K8sLabError::lab(
                format!("ConfigMap {} of {}", objects::CLUSTER_ID_CONFIGMAP, c.name),
                format!("no {}", keys::CLUSTER_ID),
            )
        })
}

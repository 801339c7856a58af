//! The gateway's failover on Liqo from its chart with two gateway replicas
//! ([`kill_active_gateway`]): the active gateway's process is killed (SIGKILL) while a pod of
//! the cluster probes a pod of its peer; the standby replica takes over (its operator takes
//! the Lease, its pod becomes the active one), the lab's load balancer moves the public address
//! to its node, and the killed container, restarted by its kubelet, comes back as the standby.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::ListParams};

use super::{K8sLab, K8sLabError, lb, realnode, views};
use crate::lab::{cluster::gateway_node, outage};

/// How long the standby may take to be the active one, and the old one to be back.
const WITHIN: Duration = Duration::from_secs(60);
/// How long the probes run after the kill at least.
const PROBE_AFTER: Duration = Duration::from_secs(6);

/// What a failover did.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The pod whose gateway was killed, and its node.
    pub killed: (String, String),
    /// The pod active after, and its node.
    pub active: (String, String),
    /// From the kill until the other pod was the active one.
    pub took_over: Duration,
    /// From the kill until the public address was on its node.
    pub moved: Duration,
    /// From the kill until the killed pod was Ready again, as the standby.
    pub back: Duration,
    /// The probes across the tunnel meanwhile.
    pub outage: outage::Outage,
}

/// The gateway pods of `cluster`: (name, node, active, ready).
async fn gateways(
    k: &K8sLab,
    cluster: &str,
) -> Result<Vec<(String, String, bool, bool)>, K8sLabError> {
    let client = k.client(cluster).await?;
    let pods = Api::<Pod>::namespaced(client, crate::liqo::NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/component=gateway"))
        .await
        .map_err(K8sLabError::kube(format!(
            "listing the gateway pods of {cluster}"
        )))?;
    Ok(pods
        .items
        .iter()
        .map(|p| {
            let active = p.metadata.labels.as_ref().is_some_and(|l| {
                l.get(control::consts::net::GATEWAY_ACTIVE_LABEL)
                    .is_some_and(|v| v == control::consts::values::TRUE)
            });
            (
                p.metadata.name.clone().unwrap_or_default(),
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                active,
                super::demo::ready(p),
            )
        })
        .collect())
}

/// Kills the active gateway of `cluster` (see the module doc) and measures the failover.
pub async fn kill_active_gateway(k: &K8sLab, cluster: &str) -> Result<Failover, K8sLabError> {
    let c = k
        .lab
        .topology
        .cluster(cluster)
        .ok_or_else(|| K8sLabError::lab(format!("cluster {cluster}"), "not in the lab"))?;
    let what = format!("the gateway failover of {cluster}");
    let pods = gateways(k, cluster).await?;
    let (Some(active), Some(standby)) = (
        pods.iter().find(|p| p.2 && p.3),
        pods.iter().find(|p| !p.2 && p.3),
    ) else {
        return Err(K8sLabError::lab(
            what,
            format!(
                "needs a Ready active gateway and a Ready standby (two replicas: `up --chart --gateway-replicas 2`); gateway pods (name, node, active, ready): {pods:?}"
            ),
        ));
    };
    let pids = realnode::pids_named(&k.lab, c, &active.1, "liqo-gateway")?;
    let [pid] = pids[..] else {
        return Err(K8sLabError::lab(
            what,
            format!(
                "{} liqo-gateway processes on {} ({pids:?})",
                pids.len(),
                active.1
            ),
        ));
    };
    let views = views::peerings(k).await?;
    let (src, dst, addr, _) = outage::pair_across_views(&k.lab, &views, cluster, &[])?
        .ok_or_else(|| K8sLabError::lab(what.clone(), "no peering to probe across"))?;
    let prober = outage::Prober::start(&src, &dst, addr)?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|e| K8sLabError::lab(format!("killing liqo-gateway {pid} on {}", active.1), e))?;
    let (mut took_over, mut moved, mut back) = (None, None, None);
    while back.is_none() || moved.is_none() || t.elapsed() < PROBE_AFTER {
        if t.elapsed() > WITHIN {
            return Err(K8sLabError::lab(
                what,
                format!(
                    "not over within {} s: the standby active after {took_over:?}, the address moved after {moved:?}, the killed pod back after {back:?}; gateway pods (name, node, active, ready): {:?}",
                    WITHIN.as_secs(),
                    gateways(k, cluster).await?
                ),
            ));
        }
        let now = gateways(k, cluster).await?;
        if took_over.is_none() && now.iter().any(|p| p.0 == standby.0 && p.2) {
            took_over = Some(t.elapsed());
        }
        if moved.is_none() && gateway_node(&k.lab, c)? == standby.1 {
            moved = Some(t.elapsed());
        }
        if took_over.is_some()
            && back.is_none()
            && now.iter().any(|p| p.0 == active.0 && !p.2 && p.3)
        {
            back = Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let outage = prober.finish()?;
    let now_active = lb::active_gateway_node(&k.client(cluster).await?, c).await?;
    Ok(Failover {
        killed: (active.0.clone(), active.1.clone()),
        active: (standby.0.clone(), now_active.unwrap_or_default()),
        took_over: took_over.unwrap_or_default(),
        moved: moved.unwrap_or_default(),
        back: back.unwrap_or_default(),
        outage,
    })
}

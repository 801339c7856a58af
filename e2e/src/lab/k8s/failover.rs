//! The gateway's failover on Liqo from its chart with two gateway replicas
//! ([`kill_active_gateway`]): the active gateway's process is killed (SIGKILL) while a pod of
//! the cluster probes a pod of its peer; the standby replica takes over (its operator takes
//! the Lease, its pod becomes the active one), the lab's load balancer moves the public address
//! to its node, and the killed container, restarted by its kubelet, comes back as the standby.

use std::time::{Duration, Instant};

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
    /// From the kill until the killed pod's gateway had restarted and the pod was Ready
    /// again, as the standby.
    pub back: Duration,
    /// The probes across the tunnel meanwhile.
    pub outage: outage::Outage,
    /// How often, once the standby had taken over, a look saw another pod active or none (a
    /// new active one that stepped down again, e.g. on a Lease renewal that came too late). A
    /// lower bound: a step down and back within one look (about 100 ms) is not seen.
    pub relapses: u32,
}

/// How many kills a failover gets: a killed gateway restarted by its kubelet before its operator
/// saw it gone (three missed looks, 0.75 s) is back in place, still the active one; that is no
/// failover to measure, so it is killed again (CI run 49 saw it once).
const ATTEMPTS: usize = 3;

/// What one kill came to.
enum Outcome {
    /// The standby took over.
    Failover(Box<Failover>),
    /// The killed gateway came back in place, still the active one, after this long.
    InPlace(Duration),
}

/// Kills the active gateway of `cluster` (see the module doc) and measures the failover: an
/// error unless the standby became the active one, the public address followed it and the
/// killed gateway came back as the standby, all within a minute. A gateway back in place before
/// its operator saw it gone is killed again (at most [`ATTEMPTS`] kills), and said so.
pub async fn kill_active_gateway(k: &K8sLab, cluster: &str) -> Result<Failover, K8sLabError> {
    for attempt in 1..=ATTEMPTS {
        match kill_once(k, cluster).await? {
            Outcome::Failover(f) => return Ok(*f),
            Outcome::InPlace(after) => println!(
                "   kill {attempt}: the gateway was back in place, still the active one, {:.1} s \
                 after (its kubelet restarted it before its operator saw it gone)",
                after.as_secs_f64()
            ),
        }
    }
    Err(K8sLabError::lab(
        format!("the gateway failover of {cluster}"),
        format!("{ATTEMPTS} kills, each gateway back in place before its standby took over"),
    ))
}

async fn kill_once(k: &K8sLab, cluster: &str) -> Result<Outcome, K8sLabError> {
    let c = k
        .lab
        .topology
        .cluster(cluster)
        .ok_or_else(|| K8sLabError::lab(format!("cluster {cluster}"), "not in the lab"))?;
    let what = format!("the gateway failover of {cluster}");
    let client = k.client(cluster).await?;
    let pods = lb::gateway_pods(&client, c).await?;
    let (Some(active), Some(standby)) = (
        pods.iter().find(|p| p.active && p.ready),
        pods.iter().find(|p| !p.active && p.ready),
    ) else {
        return Err(K8sLabError::lab(
            what,
            format!(
                "needs a Ready active gateway and a Ready standby (two replicas: `up --chart \
                 --gateway-replicas 2`); gateway pods: {pods:?}"
            ),
        ));
    };
    let pids = realnode::pids_named(&k.lab, c, &active.node, "liqo-gateway")?;
    let [pid] = pids[..] else {
        return Err(K8sLabError::lab(
            what,
            format!(
                "{} liqo-gateway processes on {} ({pids:?})",
                pids.len(),
                active.node
            ),
        ));
    };
    let views = views::peerings(k).await?;
    // The probe leaves from a pod on the killed gateway's node, the node whose routes must
    // follow the failover (a host rule the dead gateway left there once held its pods' traffic
    // until its container restarted).
    let others: Vec<String> = c
        .pods()
        .map(|(n, _)| n.name.to_string())
        .filter(|n| *n != active.node)
        .collect();
    let avoid: Vec<&str> = others.iter().map(String::as_str).collect();
    let (src, dst, addr, _) = outage::pair_across_views(&k.lab, &views, cluster, &avoid)?
        .ok_or_else(|| K8sLabError::lab(what.clone(), "no peering to probe across"))?;
    let prober = outage::Prober::start(&src, &dst, addr)?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|e| K8sLabError::lab(format!("killing liqo-gateway {pid} on {}", active.node), e))?;
    let (mut took_over, mut moved, mut back) = (None, None, None);
    let mut relapses = 0;
    loop {
        let now = lb::gateway_pods(&client, c).await?;
        let find = |name: &str| now.iter().find(|p| p.name == name);
        let standby_active = find(&standby.name).is_some_and(|p| p.active);
        if took_over.is_none() && standby_active {
            took_over = Some(t.elapsed());
        } else if took_over.is_some() && !standby_active {
            relapses += 1;
        }
        if moved.is_none() && gateway_node(&k.lab, c)? == standby.node {
            moved = Some(t.elapsed());
        }
        if back.is_none()
            && find(&active.name)
                .is_some_and(|p| p.restarts > active.restarts && p.ready && !p.active)
        {
            back = Some(t.elapsed());
        }
        if let (Some(took_over), Some(moved), Some(back)) = (took_over, moved, back)
            && t.elapsed() >= PROBE_AFTER
        {
            let outage = prober.finish()?;
            return Ok(Outcome::Failover(Box::new(Failover {
                killed: (active.name.clone(), active.node.clone()),
                active: (standby.name.clone(), standby.node.clone()),
                took_over,
                moved,
                back,
                outage,
                relapses,
            })));
        }
        // Restarted, Ready and still the active one, the standby never elected: back in place.
        if took_over.is_none()
            && t.elapsed() >= PROBE_AFTER
            && find(&active.name)
                .is_some_and(|p| p.restarts > active.restarts && p.ready && p.active)
        {
            // The probes stop; those of a kill that made no failover are not reported.
            prober.finish()?;
            return Ok(Outcome::InPlace(t.elapsed()));
        }
        if t.elapsed() > WITHIN {
            return Err(K8sLabError::lab(
                what,
                format!(
                    "not over within {} s: the standby active after {took_over:?}, the address \
                     moved after {moved:?}, the killed gateway back after {back:?}; gateway \
                     pods: {now:?}",
                    WITHIN.as_secs(),
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// A node that stops being the gateway node keeps, until its killed gateway's container restarts,
// the gateway's host rule; the overlay's rule (routes over VXLAN to the new gateway node) must
// come first so that its pods' traffic follows the failover at once. Checked at compile time.
const _: () = assert!(
    ::overlay::config::defaults::TABLE < gateway::plan::HOST_RULE_PRIORITY,
    "the overlay's rule must precede the gateway's host rule"
);

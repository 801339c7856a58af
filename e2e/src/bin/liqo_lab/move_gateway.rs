//! `liqo-lab move-gateway`: moves a cluster's gateway to another of its nodes under a TCP
//! prober and reports the interruption; exit code 1 when traffic was not restored.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result};
use e2e::lab::{self, Lab, Prefix};

use crate::shared::require_root;

pub(crate) async fn run(prefix: &Prefix, cluster: &str, node: &str) -> Result<ExitCode> {
    require_root()?;
    let k8s = if lab::k8s::is_k8s(prefix) {
        Some(lab::k8s::K8sLab::load(prefix)?)
    } else {
        None
    };
    let lab = Lab::load(prefix)?;
    let from = lab::gateway_node(
        &lab,
        lab.topology
            .cluster(cluster)
            .with_context(|| format!("no cluster {cluster:?} in lab {prefix}"))?,
    )?;
    let avoid = [from.as_str(), node];
    let pair = match &k8s {
        Some(k) => lab::outage::pair_across_views(
            &lab,
            &lab::k8s::views::peerings(k).await?,
            cluster,
            &avoid,
        )?,
        None => lab::outage::pair_across(&lab, cluster, &avoid)?,
    };
    let prober = match &pair {
        Some((src, dst, addr, _)) => Some(lab::outage::Prober::start(src, dst, *addr)?),
        None => None,
    };
    let moved = match &k8s {
        // Its node cordoned, the gateway and its operator rescheduled by the lab.
        Some(k) => lab::k8s::move_gateway(k, cluster, node)
            .await
            .map_err(anyhow::Error::from),
        None => lab::move_gateway(&lab, cluster, node)
            .await
            .map_err(anyhow::Error::from),
    };
    // Keep probing briefly so that the first answers after the move are seen.
    if prober.is_some() {
        std::thread::sleep(Duration::from_secs(1));
    }
    let outage = prober.map(lab::outage::Prober::finish).transpose()?;
    let m = moved?;
    println!(
        "moved {cluster}'s gateway from {} to {}: old gateway drained in {:.2} s, \
         new one handshaken with every peer and every overlay agent following after {:.2} s",
        m.from,
        m.to,
        m.stopped.as_secs_f64(),
        m.ready.as_secs_f64()
    );
    if let (Some(o), Some((_, _, _, what))) = (outage, pair) {
        println!(
            "traffic {what}: longest interruption {:.2} s ({} of {} TCP probes answered, one every 50 ms){}",
            o.longest_gap.as_secs_f64(),
            o.answered,
            o.probes,
            if o.up_at_end { "" } else { "; NOT RESTORED" }
        );
        if !o.up_at_end {
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `liqo-lab kill-gateway <cluster>`: the gateway's failover on Liqo from its chart with two
//! gateway replicas (`up --k8s --real-nodes --chart --gateway-replicas 2`): SIGKILL to the
//! active gateway's process while a pod probes across the tunnel; prints who took over and how
//! long traffic stopped; exit code 1 when it stopped for more than 5 s or was not back.

use std::{process::ExitCode, time::Duration};

use anyhow::Result;
use e2e::lab::{Prefix, k8s};

use crate::shared::require_root;

/// The longest interruption accepted.
const MAX_GAP: Duration = Duration::from_secs(5);

pub(crate) async fn run(prefix: &Prefix, cluster: &str) -> Result<ExitCode> {
    require_root()?;
    let k = k8s::K8sLab::load(prefix)?;
    let f = k8s::failover::kill_active_gateway(&k, cluster).await?;
    let o = &f.outage;
    println!(
        "killed liqo-gateway of pod {} on {} (SIGKILL)\n\
         the standby {} on {} active after {:.2} s; the public address on its node after {:.2} s\n\
         traffic across: longest interruption {:.2} s ({} of {} TCP probes answered, one every 50 ms)\n\
         the killed pod back (its container restarted), as the standby, after {:.2} s",
        f.killed.0,
        f.killed.1,
        f.active.0,
        f.active.1,
        f.took_over.as_secs_f64(),
        f.moved.as_secs_f64(),
        o.longest_gap.as_secs_f64(),
        o.answered,
        o.probes,
        f.back.as_secs_f64(),
    );
    if o.longest_gap > MAX_GAP || !o.up_at_end {
        println!(
            "FAILED: traffic stopped for more than {} s or was not back at the end",
            MAX_GAP.as_secs()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

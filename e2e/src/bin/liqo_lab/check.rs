//! `liqo-lab check`: every pod to every pod of its cluster and of every peer; exit code 1 when
//! a probe failed.

use std::process::ExitCode;

use anyhow::Result;
use e2e::lab::{self, Lab, Prefix, check};

pub(crate) async fn run(prefix: &Prefix) -> Result<ExitCode> {
    if lab::k8s::is_in_band(prefix) {
        println!(
            "lab {prefix} is in-band: the probes cross the tunnel made by \
             `liqoctl peer in-band` (the API servers are not reachable from the WAN)"
        );
    }
    let m = if lab::k8s::is_k8s(prefix) {
        lab::k8s::views::check(&lab::k8s::K8sLab::load(prefix)?).await?
    } else {
        check::with_peerings(&Lab::load(prefix)?)?
    };
    print!("{}", m.render());
    Ok(if m.failures().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

//! `liqo-lab peer` and `unpeer`: the lab's own peering of two clusters (refused where
//! `liqoctl` peers: with control planes).

use std::{process::ExitCode, time::Instant};

use anyhow::Result;
use e2e::lab::{self, Lab, Prefix};

use crate::shared::{refuse_k8s, require_root};

pub(crate) fn peer(prefix: &Prefix, a: &str, b: &str) -> Result<ExitCode> {
    require_root()?;
    refuse_k8s(prefix, "peer")?;
    let lab = Lab::load(prefix)?;
    let t = Instant::now();
    let (va, vb) = lab::peer(&lab, a, b)?;
    println!("peered {a} and {b} in {:.2} s", t.elapsed().as_secs_f64());
    println!(
        "  {a} sees {b}'s pods at {} (external {}), {b} sees {a}'s pods at {}",
        va.remote_pods, va.remote_external, va.local_pods_at_peer
    );
    println!(
        "  {b} sees {a}'s pods at {} (external {}), {a} sees {b}'s pods at {}",
        vb.remote_pods, vb.remote_external, vb.local_pods_at_peer
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn unpeer(prefix: &Prefix, a: &str, b: &str) -> Result<ExitCode> {
    require_root()?;
    refuse_k8s(prefix, "unpeer")?;
    let lab = Lab::load(prefix)?;
    lab::unpeer(&lab, a, b)?;
    println!("unpeered {a} and {b}");
    Ok(ExitCode::SUCCESS)
}

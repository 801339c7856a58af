//! `liqo-lab up` (`--k8s`, `--in-band`): builds the clusters of a topology and prints them.

use std::{process::ExitCode, time::Instant};

use anyhow::Result;
use e2e::lab::{self, Prefix, status};

use crate::{
    shared::{print_in_band, require_root},
    source::Source,
};

pub(crate) async fn run(
    prefix: Prefix,
    source: &Source,
    k8s: bool,
    in_band: bool,
    real_nodes: bool,
    chart: bool,
    gateway_replicas: u8,
) -> Result<ExitCode> {
    let topo = source.load()?;
    require_root()?;
    let t = Instant::now();
    let lab = if k8s {
        let k = if in_band {
            lab::k8s::up_in_band(prefix, topo).await?
        } else {
            let opts = lab::k8s::Options {
                real_nodes,
                chart,
                gateway_replicas,
                ..lab::k8s::Options::default()
            };
            lab::k8s::up(prefix, topo, &opts).await?
        };
        print!("{}", k.set.env());
        print!("{}", e2e::liqo::env(&k.liqo));
        print_in_band(&k)?;
        k.lab
    } else {
        lab::up(prefix, topo).await?
    };
    println!(
        "lab {} is up in {:.2} s",
        lab.prefix,
        t.elapsed().as_secs_f64()
    );
    print!("{}", status::render(&lab, &status::rows(&lab)?));
    Ok(ExitCode::SUCCESS)
}

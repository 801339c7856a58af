//! `liqo-lab status`: the clusters, nodes, pods and their addresses, the peerings (and what an
//! in-band lab exposes where), as a table or JSON.

use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use e2e::lab::{self, Lab, Prefix, status};

use crate::shared::print_in_band;

/// `--output`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    Table,
    Json,
}

pub(crate) async fn run(prefix: &Prefix, output: Format) -> Result<ExitCode> {
    let lab = Lab::load(prefix)?;
    let rows = status::rows(&lab)?;
    match output {
        Format::Table => {
            print!("{}", status::render(&lab, &rows));
            if lab::k8s::is_in_band(prefix) {
                print_in_band(&lab::k8s::K8sLab::load(prefix)?)?;
            }
            let peerings = if lab::k8s::is_k8s(prefix) {
                lab::k8s::views::peerings(&lab::k8s::K8sLab::load(prefix)?).await?
            } else {
                lab::peerings(&lab)?
            };
            print!("{}", status::render_peerings(&peerings));
        }
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "prefix": lab.prefix.to_string(), "topology": lab.topology, "namespaces": rows,
            }))?
        ),
    }
    Ok(ExitCode::SUCCESS)
}

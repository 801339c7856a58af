//! Where a topology comes from (`up`, `plan`): a built-in preset or a YAML file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use e2e::topology::Topology;

#[derive(Args)]
pub(crate) struct Source {
    /// A built-in topology.
    #[arg(long, conflicts_with = "file", default_value = "two-clusters")]
    preset: String,
    /// A topology file (YAML).
    #[arg(long)]
    file: Option<PathBuf>,
}

impl Source {
    /// The topology, validated.
    pub(crate) fn load(&self) -> Result<Topology> {
        match &self.file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                Topology::from_yaml(&text)
                    .with_context(|| format!("invalid topology {}", path.display()))
            }
            None => Topology::preset(&self.preset).context("invalid preset"),
        }
    }
}

//! Writes the CRD YAML files of the chart (one per CRD), or with `--check` fails naming the
//! committed files that differ from what would be written.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::Parser;
use control::crdgen::{self, Staleness};

/// Generate the Liqo CRD YAML files.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// Directory of the CRD files.
    #[arg(long, default_value = "chart/crds")]
    dir: PathBuf,
    /// Write nothing; exit 1 if a file is missing, differs or is left over.
    #[arg(long)]
    check: bool,
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let files = crdgen::render_all().context("rendering the CRDs")?;
    if cli.check {
        let stale = crdgen::check(&cli.dir, &files).context("checking the CRD files")?;
        if stale.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        for file in &stale {
            let why = match file.staleness {
                Staleness::Missing => "missing",
                Staleness::Differs => "differs from the generated one",
                Staleness::Unexpected => "no longer generated",
            };
            eprintln!("stale: {}: {why}", cli.dir.join(&file.name).display());
        }
        eprintln!("run `cargo run -p control --bin liqo-crdgen` to regenerate");
        return Ok(ExitCode::FAILURE);
    }
    for name in crdgen::write(&cli.dir, &files).context("writing the CRD files")? {
        println!("wrote {}", cli.dir.join(name).display());
    }
    Ok(ExitCode::SUCCESS)
}

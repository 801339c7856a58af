//! `liqo-lab k8s up|env|down`: real Kubernetes control planes (and Liqo with `--liqo`) as
//! local processes, left running between commands.

use std::{process::ExitCode, time::Instant};

use anyhow::Result;
use clap::Subcommand;
use e2e::{k8s, lab::Prefix};

#[derive(Subcommand)]
pub(crate) enum K8s {
    /// Start clusters (builds the binaries on first use: about 8 minutes) and wait until they
    /// serve, then leave them running.
    Up {
        /// Number of clusters (named rome, milan, turin, ...).
        #[arg(long, default_value_t = 2)]
        clusters: usize,
        /// Simulated (kwok) nodes per cluster.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Give every cluster the same pod and service CIDRs.
        #[arg(long)]
        overlapping: bool,
        /// Install Liqo on every cluster: the chart's objects, a ServiceAccount and token per
        /// component, and liqo-ipam, liqo-auth and liqo-controller-manager as processes (built
        /// beforehand: `cargo build -p ipam -p liqo-auth -p liqo-controller-manager -p liqoctl`).
        #[arg(long)]
        liqo: bool,
    },
    /// Print the shell lines that point kubectl (and liqoctl, with --liqo) at them.
    Env,
    /// Stop every process and remove every file (also after a crash).
    Down,
}

pub(crate) async fn run(prefix: Prefix, what: K8s) -> Result<ExitCode> {
    match what {
        K8s::Up {
            clusters,
            nodes,
            overlapping,
            liqo,
        } => {
            let t = Instant::now();
            let bins = k8s::binaries()?;
            let built = t.elapsed();
            let t = Instant::now();
            let set = k8s::Clusters::up(
                &bins,
                &k8s::Options {
                    prefix,
                    clusters,
                    nodes,
                    overlapping,
                },
            )
            .await?;
            println!(
                "{clusters} cluster(s) with {nodes} kwok node(s) each ready in {:.1} s (binaries: {:.1} s, {})",
                t.elapsed().as_secs_f64(),
                built.as_secs_f64(),
                bins.dir.display()
            );
            let installed = if liqo {
                let t = Instant::now();
                // On failure `set` drops: the clusters and whatever was started stop.
                let l = e2e::liqo::install(&set, &bins, &e2e::liqo::Options::default()).await?;
                println!(
                    "Liqo installed and serving on {clusters} cluster(s) in {:.1} s",
                    t.elapsed().as_secs_f64()
                );
                Some(l)
            } else {
                None
            };
            print!("{}", set.env());
            if let Some(l) = &installed {
                print!("{}", e2e::liqo::env(l));
            }
            set.detach();
        }
        K8s::Env => {
            let set = k8s::load(&prefix)?;
            print!("{}", set.env());
            if let Some(l) = e2e::liqo::load(&set)? {
                print!("{}", e2e::liqo::env(&l));
            }
        }
        K8s::Down => {
            let d = k8s::down(&prefix)?;
            println!(
                "clusters {prefix} are down: stopped {} processes ({} needed SIGKILL){}",
                d.stopped,
                d.killed,
                if d.removed {
                    ", removed their files"
                } else {
                    ""
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `liqo-overlay`: the per-node overlay agent.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use dataplane::Netlink;
use overlay::{
    agent,
    config::{Config, File},
};
use tokio::signal::unix::{SignalKind, signal};

/// VXLAN overlay to the gateway node and the policy routing for remote clusters.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the agent; the config file is watched and every change applied as a minimal diff.
    Run {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
    },
    /// Validate a configuration file.
    CheckConfig {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
    },
}

fn load(path: &PathBuf) -> Result<(String, Config)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg = File::parse(&text)
        .and_then(|f| f.validate())
        .with_context(|| format!("invalid configuration {}", path.display()))?;
    Ok((text, cfg))
}

async fn run(config: PathBuf) -> Result<()> {
    let (mut applied_text, mut cfg) = load(&config)?;
    let nl = Netlink::connect()?;
    agent::apply(&nl, &cfg)
        .await
        .context("applying the overlay")?;
    tracing::info!(node = %cfg.me, gateway = %cfg.gateway, remote = cfg.remote_cidrs.len(), "overlay up");
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut refused = String::new();
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tick.tick() => {
                let Ok(text) = std::fs::read_to_string(&config) else { continue };
                if text == applied_text || text == refused {
                    continue;
                }
                match File::parse(&text).and_then(|f| f.validate()) {
                    Ok(next) => {
                        if next.device != cfg.device {
                            agent::teardown(&nl, &cfg).await?;
                        }
                        agent::apply(&nl, &next).await.context("applying the overlay")?;
                        tracing::info!(gateway = %next.gateway, remote = next.remote_cidrs.len(), "configuration applied");
                        (cfg, applied_text) = (next, text);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "configuration refused; the running state is kept");
                        refused = text;
                    }
                }
            }
        }
    }
    agent::teardown(&nl, &cfg)
        .await
        .context("removing the overlay")?;
    tracing::info!("overlay removed");
    Ok(())
}

async fn cli(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run { config } => run(config).await,
        Command::CheckConfig { config } => {
            let (_, c) = load(&config)?;
            println!(
                "ok: node {} ({}), gateway {}, {} nodes, {} remote ranges",
                c.me,
                c.me().overlay_ip(),
                c.gateway,
                c.nodes.len(),
                c.remote_cidrs.len()
            );
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(cli(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

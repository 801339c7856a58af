//! `liqo-overlay`: the per-node overlay agent.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use dataplane::Netlink;
use overlay::{
    agent,
    config::{Config, File},
    status,
};
use tokio::signal::unix::{SignalKind, signal};

/// VXLAN overlay to the gateway node and the policy routing for remote clusters.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Default address of `/status` and `/metrics`.
const STATUS_LISTEN: &str = "127.0.0.1:9108";

#[derive(Subcommand)]
enum Command {
    /// Run the agent; the config file is watched and every change applied as a minimal diff.
    Run {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
        /// Address of `/status` and `/metrics`.
        #[arg(long, default_value = STATUS_LISTEN)]
        status_listen: SocketAddr,
    },
    /// Validate a configuration file.
    CheckConfig {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
    },
    /// Show what a running agent has applied.
    Status {
        /// Address of the agent's status endpoint.
        #[arg(long, default_value = STATUS_LISTEN)]
        address: SocketAddr,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "table")]
        output: Format,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

fn load(path: &PathBuf) -> Result<(String, Config)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg = File::parse(&text)
        .and_then(|f| f.validate())
        .with_context(|| format!("invalid configuration {}", path.display()))?;
    Ok((text, cfg))
}

async fn run(config: PathBuf, status_listen: SocketAddr) -> Result<()> {
    let (mut applied_text, mut cfg) = load(&config)?;
    let listener = tokio::net::TcpListener::bind(status_listen)
        .await
        .with_context(|| format!("binding {status_listen}"))?;
    let nl = Netlink::connect()?;
    if let Err(e) = agent::apply(&nl, &cfg).await {
        // Leave nothing half-applied behind.
        if let Err(t) = agent::teardown(&nl, &cfg).await {
            tracing::error!(error = %t, "removing a partly applied overlay");
        }
        return Err(anyhow::Error::from(e).context("applying the overlay"));
    }
    let state: status::Shared = Arc::default();
    state.lock().expect("fresh").applied(&cfg);
    tokio::spawn(status::serve(listener, Arc::clone(&state)));
    tracing::info!(node = %cfg.me, gateway = %cfg.gateway, remote = cfg.remote_cidrs.len(), status = %status_listen, "overlay up");
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
                if text == applied_text {
                    // Back to what runs: nothing is refused or failing any more.
                    let mut s = lock(&state);
                    (s.config_error, s.apply_error) = (None, None);
                    refused.clear();
                    continue;
                }
                if text == refused {
                    continue;
                }
                let next = match File::parse(&text).and_then(|f| f.validate()) {
                    Ok(next) => next,
                    Err(e) => {
                        tracing::error!(error = %e, "configuration refused; the running state is kept");
                        lock(&state).config_error = Some(e.to_string());
                        refused = text;
                        continue;
                    }
                };
                // A kernel failure is retried on the next tick (apply converges from any state).
                let result = async {
                    if next.device != cfg.device {
                        agent::teardown(&nl, &cfg).await?;
                    }
                    agent::apply(&nl, &next).await
                }
                .await;
                match result {
                    Ok(()) => {
                        tracing::info!(gateway = %next.gateway, nodes = next.nodes.len(), remote = next.remote_cidrs.len(), "configuration applied");
                        lock(&state).applied(&next);
                        (cfg, applied_text) = (next, text);
                    }
                    Err(e) => {
                        let e = format!("{:#}", anyhow::Error::from(e));
                        tracing::warn!(error = %e, "applying the configuration failed; retrying");
                        lock(&state).apply_error = Some(e);
                        if next.device != cfg.device {
                            // The old device is gone already: remove the new one's remains and
                            // treat the new config as the one to clean up on exit.
                            let _ = agent::teardown(&nl, &next).await;
                            cfg = next;
                        }
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

fn lock(s: &status::Shared) -> std::sync::MutexGuard<'_, status::Status> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

async fn cli(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run {
            config,
            status_listen,
        } => run(config, status_listen).await,
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
        Command::Status { address, output } => {
            let body = dataplane::localhttp::get(address, "/status")
                .with_context(|| format!("asking the overlay agent at {address}"))?;
            match output {
                Format::Json => println!("{body}"),
                Format::Table => {
                    let s: status::Status =
                        serde_json::from_str(&body).context("decoding the status")?;
                    print!("{}", status::render(&s));
                }
            }
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

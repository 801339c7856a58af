//! `liqo-overlay`: the per-node overlay agent.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use dataplane::Netlink;
use liqo_daemon::{
    Reload,
    exit::Threads,
    server::StatusServer,
    show::{self, Format},
    source::ConfigFile,
    tasks::Tasks,
};
use overlay::{
    agent::Agent,
    config::{Config, File},
    status,
};

/// VXLAN overlay to the gateway node and the policy routing for remote clusters.
#[derive(Parser)]
#[command(name = "liqo-overlay", version, about)]
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
        /// Seconds between convergences of the running configuration (routes, rules and
        /// neighbours changed behind the agent's back come back); 0 turns them off.
        #[arg(long, default_value_t = 10)]
        resync_secs: u64,
        /// How long to wait for the config file when it does not exist yet (`30s`, `5m`; its
        /// operator writes it); 0: a missing file is an error at once.
        #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
        wait_for_config: Duration,
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

fn load(path: &Path, text: &str) -> Result<Config> {
    File::parse(text)
        .and_then(|f| f.validate())
        .with_context(|| format!("invalid configuration {}", path.display()))
}

async fn run(
    config: PathBuf,
    status_listen: SocketAddr,
    resync: Duration,
    wait: Duration,
) -> Result<()> {
    let mut stop = Box::pin(liqo_daemon::signal::shutdown().context("installing signal handlers")?);
    let mut source = ConfigFile::watch(&config).with_resync(Some(resync));
    let Some(text) = source.first_read_or_stop(wait, &mut stop).await? else {
        return Ok(());
    };
    let cfg = load(&config, &text)?;
    let server = StatusServer::bind(status_listen).await?;
    let addr = server.local_addr();
    let nl = Netlink::connect().context("connecting to the kernel")?;
    let mut agent = Agent::start(nl, cfg)
        .await
        .context("applying the overlay")?;
    let reload = Reload::started(&source, text);
    let snapshot = {
        let (running, view) = (agent.view(), reload.view());
        move || status::Status::new(&running.borrow(), view.borrow().clone())
    };
    let mut tasks = Tasks::new();
    tasks.spawn(
        "the status server",
        server.serve(snapshot.clone(), move || status::metrics(&snapshot())),
    );
    tracing::info!(status = %addr, "serving /status and /metrics");
    let outcome = reload.run(&mut agent, source, tasks, stop).await;
    let removed = agent.shutdown().await.context("removing the overlay");
    liqo_daemon::exit::conclude(outcome, removed)
}

async fn cli(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run {
            config,
            status_listen,
            resync_secs,
            wait_for_config,
        } => {
            run(
                config,
                status_listen,
                Duration::from_secs(resync_secs),
                wait_for_config,
            )
            .await
        }
        Command::CheckConfig { config } => {
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("reading {}", config.display()))?;
            let c = load(&config, &text)?;
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
            let body = liqo_daemon::localhttp::get(address, "/status")
                .with_context(|| format!("asking the overlay agent at {address}"))?;
            print!(
                "{}",
                show::status(&body, output, status::render).context("decoding the status")?
            );
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let args = Cli::parse();
    liqo_daemon::exit::block_on(Threads::One, cli(args))
}

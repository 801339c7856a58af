//! `liqo-gateway`: the cross-cluster gateway daemon and its tools.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
    time::Duration,
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use gateway::{
    config::{Config, File},
    daemon::Gateway,
    keys::PrivateKey,
    status,
};
use tokio::signal::unix::{SignalKind, signal};

/// Userspace-WireGuard gateway between peered clusters.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway; the config file is watched and every change applied as a minimal diff.
    Run {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
        /// Address of `/status` and `/metrics`.
        #[arg(long, default_value = "127.0.0.1:9107")]
        status_listen: SocketAddr,
    },
    /// Validate a configuration file and print what it resolves to.
    CheckConfig {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
    },
    /// Print a new private key (base64).
    Genkey,
    /// Print the public key of a private key file, creating the file (mode 0600) if missing.
    Pubkey {
        /// The private key file.
        #[arg(long, default_value = gateway::config::defaults::PRIVATE_KEY_FILE)]
        private_key_file: PathBuf,
    },
    /// Show the peers of a running gateway.
    Status {
        /// Address of the gateway's status endpoint.
        #[arg(long, default_value = "127.0.0.1:9107")]
        address: SocketAddr,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

fn load(path: &Path, own: Option<gateway::keys::PublicKey>) -> Result<(String, Config)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg = File::parse(&text)
        .and_then(|f| f.validate(own))
        .with_context(|| format!("invalid configuration {}", path.display()))?;
    Ok((text, cfg))
}

async fn run(config: PathBuf, status_listen: SocketAddr) -> Result<()> {
    let (_, first) = load(&config, None)?;
    // Validate against our own key too, so that a peer using it is named by its field.
    let own = PrivateKey::load_or_create(&first.private_key_file)?.public();
    let (mut applied_text, cfg) = load(&config, Some(own))?;
    let listener = tokio::net::TcpListener::bind(status_listen)
        .await
        .with_context(|| format!("binding {status_listen}"))?;
    let mut gw = Gateway::start(cfg).await.context("starting the gateway")?;
    let public = PrivateKey::load_or_create(&gw.config().private_key_file)?.public();
    let config_error: status::ConfigError = Arc::default();
    tokio::spawn(status::serve(
        listener,
        Arc::clone(gw.device()),
        public.to_string(),
        Arc::clone(&config_error),
    ));
    println!(
        "liqo-gateway up: public key {public}, UDP port {}, status on http://{status_listen}/status",
        gw.config().listen_port
    );

    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut refused_text = String::new();
    let mut failed = false;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tick.tick() => {
                if !gw.healthy() {
                    tracing::error!("a data-path thread stopped; shutting down so the gateway can be restarted");
                    failed = true;
                    break;
                }
                let Ok(text) = std::fs::read_to_string(&config) else { continue };
                if text == applied_text || text == refused_text {
                    continue;
                }
                // A refused file is not retried until it changes; a failure of the kernel is
                // retried on the next tick.
                let result = match File::parse(&text).and_then(|f| f.validate(Some(public))) {
                    Ok(cfg) => match gw.apply(cfg).await {
                        Ok(()) => Ok(()),
                        Err(gateway::daemon::GatewayError::Config(e)) => Err(e.to_string()),
                        Err(e) => {
                            tracing::warn!(error = %format!("{:#}", anyhow::Error::from(e)), "applying the configuration failed; rolled back, retrying");
                            continue;
                        }
                    },
                    Err(e) => Err(e.to_string()),
                };
                match result {
                    Ok(()) => {
                        tracing::info!(peers = gw.config().peers.len(), "configuration applied");
                        applied_text = text;
                        *config_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "configuration refused; the running state is kept");
                        refused_text = text;
                        *config_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
            }
        }
    }
    gw.shutdown().await.context("removing the gateway")?;
    if failed {
        bail!("the data path failed (see the log above)");
    }
    Ok(())
}

async fn cli(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run {
            config,
            status_listen,
        } => run(config, status_listen).await?,
        Command::CheckConfig { config } => {
            let (_, cfg) = load(&config, None)?;
            println!(
                "ok: namespace {}, UDP port {}, MTU {}, local pods {}, {} peer(s)",
                cfg.namespace,
                cfg.listen_port,
                cfg.mtu,
                cfg.local_pod_cidr,
                cfg.peers.len()
            );
            for p in cfg.peers.values() {
                println!(
                    "  {}: {} here (our pods there {}), endpoint {}",
                    p.id,
                    p.allowed()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    p.local_pod_cidr_at_peer,
                    p.endpoint.map_or("learned".into(), |e| e.to_string())
                );
            }
        }
        Command::Genkey => println!("{}", PrivateKey::generate()?.to_base64()),
        Command::Pubkey { private_key_file } => println!(
            "{}",
            PrivateKey::load_or_create(&private_key_file)?.public()
        ),
        Command::Status { address, output } => {
            let body = dataplane::localhttp::get(address, "/status")
                .with_context(|| format!("asking the gateway at {address}"))?;
            match output {
                Format::Json => println!("{body}"),
                Format::Table => {
                    let s: status::Status =
                        serde_json::from_str(&body).context("decoding the status")?;
                    print!("{}", status::render(&s));
                }
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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

//! `liqo-gateway`: the cross-cluster gateway daemon and its tools.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
    time::Duration,
};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use gateway::{
    config::{Config, File},
    daemon::Gateway,
    keys::PrivateKey,
    status,
};
use liqo_daemon::{
    Reload,
    exit::Threads,
    server::StatusServer,
    show::{self, Format, out},
    source::ConfigFile,
    tasks::Tasks,
};

/// Userspace-WireGuard gateway between peered clusters.
#[derive(Parser)]
#[command(name = "liqo-gateway", version, about)]
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
        /// Seconds between convergences of the running configuration (routes, rules and NAT
        /// changed behind the gateway's back come back); 0 turns them off.
        #[arg(long, default_value_t = 10)]
        resync_secs: u64,
        /// How long to wait for the config file when it does not exist yet (`30s`, `5m`; its
        /// operator writes it); 0: a missing file is an error at once.
        #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
        wait_for_config: Duration,
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

fn load(path: &Path, text: &str, own: Option<gateway::keys::PublicKey>) -> Result<Config> {
    File::parse(text)
        .and_then(|f| f.validate(own))
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
    // Validate against our own key too, so that a peer using it is named by its field: the one
    // `publicKey` names (the start checks the file holds it), else the file's (made if missing).
    let first = load(&config, &text, None)?;
    let own = match first.public_key {
        Some(k) => k,
        None => PrivateKey::load_or_create(&first.private_key_file)?.public(),
    };
    let cfg = load(&config, &text, Some(own))?;
    let server = StatusServer::bind(status_listen).await?;
    let addr = server.local_addr();
    let mut gw = Gateway::start(cfg).await.context("starting the gateway")?;
    let reload = Reload::started(&source, text);
    let snapshot = {
        // The public key is read live: a key switch shows at once.
        let (device, view) = (Arc::clone(gw.device()), reload.view());
        move || status::status(&device, view.borrow().clone())
    };
    let mut tasks = Tasks::new();
    tasks.spawn(
        "the status server",
        server.serve(snapshot.clone(), move || status::metrics(&snapshot())),
    );
    out(&format!(
        "liqo-gateway up: public key {}, UDP port {}, status on http://{addr}/status",
        gw.public_key(),
        gw.config().listen_port
    ));
    let outcome = reload.run(&mut gw, source, tasks, stop).await;
    let removed = gw.shutdown().await.context("removing the gateway");
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
            .await?
        }
        Command::CheckConfig { config } => {
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("reading {}", config.display()))?;
            let cfg = load(&config, &text, None)?;
            let mut text = format!(
                "ok: namespace {}, UDP port {}, MTU {}, local pods {}, {} peer(s)\n",
                cfg.namespace,
                cfg.listen_port,
                cfg.mtu,
                cfg.local_pod_cidr,
                cfg.peers.len()
            );
            for p in cfg.peers.values() {
                text.push_str(&format!(
                    "  {}: {} here (our pods there {}), endpoint {}\n",
                    p.id,
                    p.allowed()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    p.local_pod_cidr_at_peer,
                    p.endpoint.map_or("learned".into(), |e| e.to_string())
                ));
            }
            out(&text);
        }
        Command::Genkey => out(&PrivateKey::generate()?.to_base64()),
        Command::Pubkey { private_key_file } => {
            out(&PrivateKey::load_or_create(&private_key_file)?
                .public()
                .to_string())
        }
        Command::Status { address, output } => {
            let body = liqo_daemon::localhttp::get(address, "/status")
                .with_context(|| format!("asking the gateway at {address}"))?;
            out(&show::status(&body, output, status::render).context("decoding the status")?);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Cli::parse();
    liqo_daemon::exit::block_on(Threads::Two, cli(args))
}

//! `liqo-ipam serve` on the daemon runtime (`liqo-daemon`): flags and the watched config file,
//! the state, the gRPC server, `/status` and `/metrics`, and a clean stop on SIGTERM or SIGINT.
//! A changed config file's pools and reserved subnets are applied while running; a change to
//! any other field is refused naming it, and the running state is kept.

use std::{
    future::Future,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, anyhow};
use clap::Args;
use ipam::{
    service::{Managed, Service, ServiceError, server::Server},
    settings::{self, Settings},
    store::FileStore,
};
use liqo_daemon::{
    ApplyError, Daemon, FieldError, Reload, server::StatusServer, source::ConfigFile, tasks::Tasks,
};
use liqo_types::Cidr;
use tokio::sync::watch;

/// `serve` flags; the config file (`--config`, YAML) takes the same names in camelCase.
#[derive(Args)]
pub(crate) struct Serve {
    /// YAML file with any of the settings below (flags win). Watched: changes to pools,
    /// additionalPools and reservedSubnets apply while running; others need a restart.
    #[arg(long)]
    config: Option<PathBuf>,
    /// gRPC listen address [default: 127.0.0.1:6000]. Anything but loopback needs
    /// --tls-cert-file, --tls-key-file and --token-file or --client-ca-file.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// /metrics and /status listen address [default: 127.0.0.1:9106].
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// State file (crash-safe JSON) [default: /var/lib/liqo-ipam/state.json].
    #[arg(long)]
    state: Option<PathBuf>,
    /// Local pod CIDR.
    #[arg(long)]
    pod_cidr: Option<Cidr>,
    /// Local service CIDR [default: 10.96.0.0/12].
    #[arg(long)]
    service_cidr: Option<Cidr>,
    /// Requested local external CIDR [default: 10.70.0.0/16].
    #[arg(long)]
    external_cidr: Option<Cidr>,
    /// Pools (comma-separated; replaces the defaults 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16).
    #[arg(long, value_delimiter = ',')]
    pools: Option<Vec<String>>,
    /// Pools added to --pools or to the defaults (comma-separated).
    #[arg(long, value_delimiter = ',')]
    additional_pools: Option<Vec<String>>,
    /// Subnets never handed out (comma-separated; '' for none).
    #[arg(long, value_delimiter = ',')]
    reserved_subnets: Option<Vec<String>>,
    /// Serve TLS with this certificate chain (PEM).
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The private key of --tls-cert-file (PEM).
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// Require this bearer token on every call (a file, e.g. a mounted Secret; 0600 or 0400).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Require a client certificate signed by this CA on every call (PEM; needs TLS).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
}

/// A comma-separated flag's CIDRs (empty items ignored, so '' is the empty list).
fn cidrs(flag: &str, v: Option<Vec<String>>) -> Result<Option<Vec<Cidr>>> {
    v.map(|v| {
        v.iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().with_context(|| format!("--{flag}")))
            .collect()
    })
    .transpose()
}

impl Serve {
    /// The flags as settings, and the config file.
    fn settings(self) -> Result<(Settings, Option<PathBuf>)> {
        let s = Settings {
            listen: self.listen,
            metrics_listen: self.metrics_listen,
            state: self.state,
            pod_cidr: self.pod_cidr,
            service_cidr: self.service_cidr,
            external_cidr: self.external_cidr,
            pools: cidrs("pools", self.pools)?,
            additional_pools: cidrs("additional-pools", self.additional_pools)?,
            reserved_subnets: cidrs("reserved-subnets", self.reserved_subnets)?,
            tls_cert_file: self.tls_cert_file,
            tls_key_file: self.tls_key_file,
            token_file: self.token_file,
            client_ca_file: self.client_ca_file,
        };
        Ok((s, self.config))
    }
}

/// The running service as the reload loop drives it.
struct Ipam {
    service: Service,
    /// The flags, which win over every text of the file.
    flags: Settings,
    /// The settings in force.
    running: Settings,
    /// The config file, if any.
    config: Option<PathBuf>,
}

/// Who sets the pools and reserved subnets: a flag, else the config file, else the API.
fn managed(flags: &Settings, running: &Settings, config: Option<&Path>) -> Managed {
    let by = |flag: bool, given: bool, flag_name: &str, field: &str| {
        if flag {
            Some(flag_name.to_owned())
        } else if given {
            config.map(|p| format!("{field} in {}", p.display()))
        } else {
            None
        }
    };
    Managed {
        pools: by(
            flags.pools.is_some() || flags.additional_pools.is_some(),
            running.pools.is_some() || running.additional_pools.is_some(),
            "--pools/--additional-pools",
            "pools/additionalPools",
        ),
        reserved: by(
            flags.reserved_subnets.is_some(),
            running.reserved_subnets.is_some(),
            "--reserved-subnets",
            "reservedSubnets",
        ),
    }
}

impl Ipam {
    fn apply_now(&mut self, new: Settings) -> Result<(), ApplyError> {
        let change = new
            .change_from(&self.running)
            .map_err(ApplyError::Refused)?;
        if change.pools.is_some() || change.reserved.is_some() {
            self.service.reconfigure(&change).map_err(|e| match e {
                ServiceError::Ipam(ipam) => {
                    let field = settings::refused_field(&change, &new, &ipam);
                    ApplyError::Refused(liqo_types::field::bad(field, ipam.to_string()))
                }
                // Saving failed and the change was undone: try again.
                e @ ServiceError::Store(_) => ApplyError::failed(e),
            })?;
            tracing::info!(pools = ?change.pools, reserved = ?change.reserved, "pools and reserved subnets changed");
        }
        self.service
            .set_managed(managed(&self.flags, &new, self.config.as_deref()));
        self.running = new;
        Ok(())
    }
}

impl Daemon for Ipam {
    type Config = Settings;

    fn parse(&self, text: &str) -> Result<Settings, FieldError> {
        let s = self.flags.clone().over(Settings::from_yaml(text)?);
        s.pools()?;
        s.reserved()?;
        Ok(s)
    }

    fn apply(&mut self, new: Settings) -> impl Future<Output = Result<(), ApplyError>> + Send {
        std::future::ready(self.apply_now(new))
    }
}

/// Resolves once `stop` turns true.
async fn stopped(mut stop: watch::Receiver<bool>) {
    // An error means the sender is gone, which only happens once we are stopping anyway.
    let _ = stop.wait_for(|s| *s).await;
}

pub(crate) async fn serve(args: Serve) -> Result<()> {
    let shutdown = liqo_daemon::signal::shutdown().context("installing the signal handlers")?;
    let (flags, config) = args.settings()?;
    // Watch before the first read, so a change made meanwhile is seen.
    let source = config.map(ConfigFile::watch);
    let text = source.as_ref().map(ConfigFile::read).transpose()?;
    let file = match (&source, &text) {
        (Some(source), Some(text)) => Settings::from_yaml(text)
            .with_context(|| format!("invalid config file {}", source.path().display()))?,
        _ => Settings::default(),
    };
    let settings = flags.clone().over(file);
    // Refuse an exposed, unauthenticated listener or unusable TLS or token files before
    // touching the state.
    let security = settings.security();
    let grpc = Server::bind(settings.listen(), &security).await?;
    let (config, overrides) = settings.config().context("invalid settings")?;
    let state = settings.state();
    if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let service = Service::open(config, overrides, Box::new(FileStore::new(&state)))
        .with_context(|| format!("opening the IPAM state {}", state.display()))?;
    let status_server = StatusServer::bind(settings.metrics_listen()).await?;

    let listen = grpc.local_addr();
    let scheme = if grpc.tls() { "https" } else { "http" };
    let auth = match (&security.token_file, &security.client_ca_file) {
        (Some(_), Some(_)) => "bearer token and client certificate required",
        (Some(_), None) => "bearer token required",
        (None, Some(_)) => "client certificate required",
        (None, None) => "no authentication",
    };
    let metrics_listen = status_server.local_addr();
    let reload = source
        .as_ref()
        .zip(text)
        .map(|(s, t)| Reload::started(s, t));
    let view = reload.as_ref().map(Reload::view);
    let status = {
        let (service, view, state) = (service.clone(), view.clone(), state.clone());
        move || {
            let (peers, endpoints) = service.read(|i| (i.peers().count(), i.endpoints().count()));
            serde_json::json!({
                "listen": format!("{scheme}://{listen}"),
                "authentication": auth,
                "state": state,
                "peers": peers,
                "endpoints": endpoints,
                "reload": view.as_ref().map(|v| v.borrow().clone()),
            })
        }
    };
    let metrics = {
        let (m, view) = (service.metrics(), view);
        move || {
            let mut r = m.registry();
            if let Some(v) = &view {
                v.borrow().register_metrics(&mut r);
            }
            r
        }
    };
    let mut tasks = Tasks::new();
    tasks.spawn(
        "the /status and /metrics server",
        status_server.serve(status, metrics),
    );
    tracing::info!(%listen, scheme, auth, %metrics_listen, state = %state.display(), "liqo-ipam serving");
    println!(
        "liqo-ipam serving gRPC on {scheme}://{listen} ({auth}), metrics on http://{metrics_listen}/metrics, state in {}",
        state.display()
    );

    let (stop, stop_rx) = watch::channel(false);
    let grpc = grpc.run(&service, stopped(stop_rx));
    tokio::pin!(grpc);
    service.set_managed(managed(
        &flags,
        &settings,
        source.as_ref().map(ConfigFile::path),
    ));
    let mut daemon = Ipam {
        service: service.clone(),
        config: source.as_ref().map(|s| s.path().to_owned()),
        flags,
        running: settings,
    };
    let run = async {
        match (reload, source) {
            (Some(reload), Some(source)) => reload.run(&mut daemon, source, tasks, shutdown).await,
            _ => tasks.run(shutdown).await,
        }
    };
    // Until a signal, a failed task (the status server) or the gRPC server failing.
    let outcome = tokio::select! {
        r = run => r,
        r = &mut grpc => {
            r?;
            return Err(anyhow!("the gRPC server stopped unexpectedly"));
        }
    };
    // Let the calls in flight finish (each finished change is saved already).
    stop.send_replace(true);
    let stopped = grpc.await;
    let signal = outcome?;
    stopped?;
    tracing::info!(%signal, "stopped");
    Ok(())
}

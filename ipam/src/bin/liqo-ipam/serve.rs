//! `liqo-ipam serve`: flags and config file, opening the state, serving gRPC and metrics until
//! SIGTERM or SIGINT.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use ipam::{
    Config, parse_cidr,
    service::{
        Overrides, Service,
        server::{Security, Server},
    },
    store::FileStore,
};
use ipnet::Ipv4Net;
use serde::Deserialize;
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::watch,
};

/// The gRPC address when none is given: loopback only.
const DEFAULT_LISTEN: &str = "127.0.0.1:6000";
/// The metrics address when none is given.
const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9106";
/// The state file when none is given.
const DEFAULT_STATE: &str = "/var/lib/liqo-ipam/state.json";

/// `serve` flags; a YAML config file (same names, camelCase) may give them instead.
#[derive(Args, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub(crate) struct Serve {
    /// YAML file with any of the settings below (flags win).
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// gRPC listen address [default: 127.0.0.1:6000]. Anything but loopback needs
    /// --tls-cert-file, --tls-key-file and --token-file or --client-ca-file.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Prometheus metrics listen address [default: 127.0.0.1:9106].
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// State file (crash-safe JSON) [default: /var/lib/liqo-ipam/state.json].
    #[arg(long)]
    state: Option<PathBuf>,
    /// Local pod CIDR.
    #[arg(long)]
    pod_cidr: Option<String>,
    /// Local service CIDR.
    #[arg(long)]
    service_cidr: Option<String>,
    /// Requested local external CIDR.
    #[arg(long)]
    external_cidr: Option<String>,
    /// Pools (comma-separated; replaces the defaults 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16).
    #[arg(long, value_delimiter = ',')]
    pools: Option<Vec<String>>,
    /// Pools added to the defaults (comma-separated).
    #[arg(long, value_delimiter = ',')]
    additional_pools: Option<Vec<String>>,
    /// Subnets never handed out (comma-separated).
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

impl Serve {
    /// Flags over the config file.
    fn merged(self) -> Result<Serve> {
        let Some(path) = &self.config else {
            return Ok(self);
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file: Serve = serde_saphyr::from_str(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        Ok(Serve {
            config: None,
            listen: self.listen.or(file.listen),
            metrics_listen: self.metrics_listen.or(file.metrics_listen),
            state: self.state.or(file.state),
            pod_cidr: self.pod_cidr.or(file.pod_cidr),
            service_cidr: self.service_cidr.or(file.service_cidr),
            external_cidr: self.external_cidr.or(file.external_cidr),
            pools: self.pools.or(file.pools),
            additional_pools: self.additional_pools.or(file.additional_pools),
            reserved_subnets: self.reserved_subnets.or(file.reserved_subnets),
            tls_cert_file: self.tls_cert_file.or(file.tls_cert_file),
            tls_key_file: self.tls_key_file.or(file.tls_key_file),
            token_file: self.token_file.or(file.token_file),
            client_ca_file: self.client_ca_file.or(file.client_ca_file),
        })
    }

    fn security(&self) -> Security {
        Security {
            tls_cert_file: self.tls_cert_file.clone(),
            tls_key_file: self.tls_key_file.clone(),
            token_file: self.token_file.clone(),
            client_ca_file: self.client_ca_file.clone(),
        }
    }
}

fn cidrs(flag: &str, v: &[String]) -> Result<Vec<Ipv4Net>> {
    v.iter()
        .filter(|s| !s.is_empty())
        .map(|s| parse_cidr(s).with_context(|| format!("--{flag}")))
        .collect()
}

fn cidr(flag: &str, v: Option<&String>, default: Option<&str>) -> Result<Ipv4Net> {
    let s = v
        .map(String::as_str)
        .or(default)
        .with_context(|| format!("--{flag} is required"))?;
    parse_cidr(s).with_context(|| format!("--{flag}"))
}

/// The IPAM configuration and the start-up overrides the merged settings ask for.
fn ipam_config(a: &Serve) -> Result<(Config, Overrides)> {
    let mut config = Config::new(
        cidr("pod-cidr", a.pod_cidr.as_ref(), None)?,
        cidr(
            "service-cidr",
            a.service_cidr.as_ref(),
            Some("10.96.0.0/12"),
        )?,
    );
    config.external_cidr = cidr(
        "external-cidr",
        a.external_cidr.as_ref(),
        Some(ipam::state::DEFAULT_EXTERNAL_CIDR),
    )?;
    let mut pools = a.pools.as_deref().map(|p| cidrs("pools", p)).transpose()?;
    if let Some(extra) = a.additional_pools.as_deref() {
        pools
            .get_or_insert_with(|| config.pools.clone())
            .extend(cidrs("additional-pools", extra)?);
    }
    let reserved = a
        .reserved_subnets
        .as_deref()
        .map(|r| cidrs("reserved-subnets", r))
        .transpose()?;
    if let Some(p) = &pools {
        config.pools.clone_from(p);
    }
    if let Some(r) = &reserved {
        config.reserved.clone_from(r);
    }
    Ok((config, Overrides { pools, reserved }))
}

/// Resolves once SIGTERM or SIGINT arrives (the handlers are installed before this returns).
fn stop_signal() -> Result<impl Future<Output = &'static str>> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

/// Resolves once `stop` turns true.
async fn stopped(mut stop: watch::Receiver<bool>) {
    // An error means the sender is gone, which only happens once we are stopping anyway.
    let _ = stop.wait_for(|s| *s).await;
}

pub(crate) async fn serve(args: Serve) -> Result<()> {
    let signal = stop_signal()?;
    let a = args.merged()?;
    let listen = a
        .listen
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("literal"));
    let metrics_listen = a
        .metrics_listen
        .unwrap_or_else(|| DEFAULT_METRICS_LISTEN.parse().expect("literal"));
    let security = a.security();
    // Refuse an exposed, unauthenticated listener or unusable TLS or token files before
    // touching the state.
    let grpc = Server::bind(listen, &security).await?;
    let (config, overrides) = ipam_config(&a)?;
    let state = a.state.unwrap_or_else(|| PathBuf::from(DEFAULT_STATE));
    if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let service = Service::open(config, overrides, Box::new(FileStore::new(&state)))
        .with_context(|| format!("opening the IPAM state {}", state.display()))?;
    let metrics = service.metrics();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move { metrics.render() }),
    );
    let ml = tokio::net::TcpListener::bind(metrics_listen)
        .await
        .with_context(|| format!("binding the metrics address {metrics_listen}"))?;
    let listen = grpc.local_addr();
    let auth = match (&security.token_file, &security.client_ca_file) {
        (Some(_), Some(_)) => "bearer token and client certificate required",
        (Some(_), None) => "bearer token required",
        (None, Some(_)) => "client certificate required",
        (None, None) => "no authentication",
    };
    let scheme = if grpc.tls() { "https" } else { "http" };
    tracing::info!(%listen, scheme, auth, %metrics_listen, state = %state.display(), "liqo-ipam serving");
    println!(
        "liqo-ipam serving gRPC on {scheme}://{listen} ({auth}), metrics on http://{metrics_listen}/metrics, state in {}",
        state.display()
    );

    let (stop, stop_rx) = watch::channel(false);
    let signals = async move {
        let name = signal.await;
        tracing::info!(signal = name, "stopping");
        stop.send_replace(true);
        Ok::<(), anyhow::Error>(())
    };
    let grpc = async {
        grpc.run(&service, stopped(stop_rx.clone()))
            .await
            .map_err(anyhow::Error::from)
    };
    let metrics_server = async {
        axum::serve(ml, app)
            .with_graceful_shutdown(stopped(stop_rx.clone()))
            .await
            .with_context(|| format!("metrics server on {metrics_listen}"))
    };
    // The first error (the gRPC or the metrics server failing) stops the daemon with it.
    tokio::try_join!(signals, grpc, metrics_server)?;
    tracing::info!("stopped");
    Ok(())
}

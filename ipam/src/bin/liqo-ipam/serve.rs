//! `liqo-ipam serve`'s flags, turned into the settings the daemon ([`ipam::daemon`]) runs
//! with.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use ipam::settings::{Settings, StoreKind, configmap_name, namespace_name, secret_name};
use liqo_types::Cidr;

/// `serve` flags; the config file (`--config`, YAML) takes the same names in camelCase.
#[derive(Args)]
pub(crate) struct Serve {
    /// YAML file with any of the settings below (flags win). Watched: changes to pools,
    /// additionalPools and reservedSubnets apply while running; others need a restart.
    #[arg(long)]
    config: Option<PathBuf>,
    /// gRPC listen address [default: 127.0.0.1:6000]. Anything but loopback needs --tls-secret,
    /// or --tls-cert-file, --tls-key-file and --token-file or --client-ca-file.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// /metrics and /status listen address [default: 127.0.0.1:9106].
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Where the state is kept: `file` (--state) or `configmap` (--state-configmap in
    /// --namespace, through the in-cluster config or KUBECONFIG) [default: file].
    #[arg(long, value_enum)]
    store: Option<StoreKind>,
    /// State file (crash-safe JSON) [default: /var/lib/liqo-ipam/state.json].
    #[arg(long)]
    state: Option<PathBuf>,
    /// The ConfigMap of the state, with --store configmap [default: liqo-ipam-state].
    #[arg(long, value_parser = configmap_name)]
    state_configmap: Option<String>,
    /// The namespace of --state-configmap and --tls-secret [default: liqo].
    #[arg(long, value_parser = namespace_name)]
    namespace: Option<String>,
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
    /// Serve TLS and require a bearer token, both kept in this Secret of --namespace (through
    /// the in-cluster config or KUBECONFIG): made at start when absent, or when its certificate
    /// is not valid for the names (liqo-ipam, liqo-ipam.<ns>, liqo-ipam.<ns>.svc,
    /// liqo-ipam.<ns>.svc.cluster.local, --tls-names) or within 30 days of its end; else served
    /// as it is (10 years; a restart renews it). Keys ca.crt, ca.key, tls.crt, tls.key, token.
    /// Needs secrets create, and get and update of that name.
    #[arg(long, value_parser = secret_name, conflicts_with_all = ["tls_cert_file", "tls_key_file", "token_file"])]
    tls_secret: Option<String>,
    /// Names of --tls-secret's certificate besides the Service's (DNS names or IP addresses,
    /// comma-separated).
    #[arg(long, value_delimiter = ',', requires = "tls_secret")]
    tls_names: Option<Vec<String>>,
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
            store: self.store,
            state: self.state,
            state_configmap: self.state_configmap,
            namespace: self.namespace,
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
            tls_secret: self.tls_secret,
            tls_names: self.tls_names,
        };
        Ok((s, self.config))
    }
}

/// Runs the daemon with these flags.
pub(crate) async fn serve(args: Serve) -> Result<()> {
    let (flags, config) = args.settings()?;
    ipam::daemon::serve(flags, config).await?;
    Ok(())
}

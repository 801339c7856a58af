//! The flags both operators take (flattened into each binary's own), and the checks of flag
//! values shared with the rest of the tree: `--ipam-address` is checked by liqo-ipam's own
//! client options, as the controller-manager checks it.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

/// The flags of both operators.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// The Liqo namespace (the gateway's Lease, key Secrets and Service; the identity).
    #[arg(short = 'n', long, default_value = "liqo")]
    pub namespace: String,
    /// The node this operator serves (the gateway operator: the Lease's holder, its InternalIP
    /// is `status.gatewayIP`).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// The daemon's fixed settings (YAML of its config, without peers, nodes or ranges).
    #[arg(long)]
    pub base_config: PathBuf,
    /// The daemon's config file, written atomically (the daemon reloads it).
    #[arg(
        long,
        required_unless_present = "fake_dataplane",
        conflicts_with = "fake_dataplane"
    )]
    pub config: Option<PathBuf>,
    /// No data plane: no file is written (the gateway operator reports a rendered peer
    /// Connected).
    #[arg(long)]
    pub fake_dataplane: bool,
    /// Where Prometheus metrics are served (`GET /metrics`).
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// How long a deleted TunnelEndpoint waits for a daemon that cannot be read or refuses its
    /// config before the finalizer is released anyway, with a Warning Event; also how long a
    /// Node may be NotReady before its route holds are forgotten (`300s`, `5m`).
    #[arg(long, default_value = "5m", value_parser = parse_grace)]
    pub release_grace: Duration,
}

/// The liqo-ipam service's options (`--ipam-address`, `--ipam-ca-file`, `--ipam-token-file`).
#[derive(Debug, Clone, clap::Args)]
pub struct Ipam {
    /// The liqo-ipam service (`http://host:port`, `https://` for TLS): our external CIDR and
    /// the endpoint mappings.
    #[arg(long, value_parser = ipam_address)]
    pub ipam_address: Option<String>,
    /// The CA of liqo-ipam's certificate (an https address).
    #[arg(long, requires = "ipam_address")]
    pub ipam_ca_file: Option<PathBuf>,
    /// A file holding the bearer token liqo-ipam requires.
    #[arg(long, requires = "ipam_address")]
    pub ipam_token_file: Option<PathBuf>,
}

impl Ipam {
    /// The client options, checked (the files read, the combination allowed); the error names
    /// `--ipam-address`.
    pub fn options(&self) -> Result<Option<ipam::service::client::ClientOptions>, IpamFlagError> {
        let Some(address) = &self.ipam_address else {
            return Ok(None);
        };
        let mut o = ipam::service::client::ClientOptions::new(address.clone());
        o.ca_file = self.ipam_ca_file.clone();
        o.token_file = self.ipam_token_file.clone();
        o.prepare().map_err(|source| IpamFlagError {
            address: address.clone(),
            source,
        })?;
        Ok(Some(o))
    }
}

/// The IPAM flags do not make a usable client.
#[derive(Debug, thiserror::Error)]
#[error("--ipam-address {address}")]
pub struct IpamFlagError {
    /// The address given.
    pub address: String,
    /// Why.
    #[source]
    pub source: ipam::service::client::ClientError,
}

/// An `http://` or `https://` address, as liqo-ipam's client takes it.
pub fn ipam_address(s: &str) -> Result<String, InvalidIpamAddress> {
    ipam::service::client::ClientOptions::new(s)
        .prepare()
        .map_err(InvalidIpamAddress)?;
    Ok(s.to_owned())
}

/// An address liqo-ipam's client refuses (its message is the client's).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct InvalidIpamAddress(pub ipam::service::client::ClientError);

/// A grace as a flag gives it (`300s`, `5m`, `1m30s`).
pub fn parse_grace(s: &str) -> Result<Duration, InvalidGrace> {
    humantime::parse_duration(s).map_err(|cause| InvalidGrace {
        text: s.to_owned(),
        cause,
    })
}

/// A grace that does not parse; the message carries its cause (a flag's error is shown alone).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{text:?}: {cause} (e.g. 300s, 5m)")]
pub struct InvalidGrace {
    /// The text given.
    pub text: String,
    /// Why it does not parse.
    pub cause: humantime::DurationError,
}

//! The command line (clap derive): the global flags, the commands and their flags, each value
//! validated while parsing, so a bad flag is refused with an error naming it (and its value,
//! unless it is a token) before anything is read or written.

use std::{fmt, path::PathBuf, str::FromStr, time::Duration};

use clap::{
    Arg, Args, Command as ClapCommand, Parser, Subcommand,
    builder::TypedValueParser,
    error::{Error as ClapError, ErrorKind},
};
use clap_complete::Shell;
use control::{
    api::{ClusterId, ClusterName},
    consts::objects,
    identity::AuthToken,
    names::{NamespaceName, ObjectName},
};

pub use crate::offload::args::{
    Offload, OffloadNamespace, OutputFormat, Unoffload, parse_selector,
};

/// The default of every `--timeout` but `offload namespace`'s (upstream's).
pub const DEFAULT_TIMEOUT: &str = "120s";

/// liqoctl: peer this cluster with other Liqo clusters (also `kubectl liqo`).
#[derive(Debug, Parser)]
#[command(name = "liqoctl", version, about, propagate_version = true)]
pub struct Cli {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster configuration).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace where Liqo is installed.
    #[arg(short = 'n', long, global = true, default_value = objects::LIQO_NAMESPACE)]
    pub namespace: NamespaceName,
    /// More logs on stderr (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate the commands to peer with this cluster.
    #[command(subcommand)]
    Generate(Generate),
    /// Enable a peering with a remote cluster.
    Peer(PeerArgs),
    /// Disable a peering with a remote cluster.
    Unpeer(UnpeerArgs),
    /// Offload a namespace to (a subset of) the peered clusters.
    #[command(subcommand)]
    Offload(Offload),
    /// Disable the offloading of a namespace (its remote namespaces, and everything in them,
    /// are deleted).
    #[command(subcommand)]
    Unoffload(Unoffload),
    /// Show this cluster's identity, its auth URL and its peerings.
    Status,
    /// Give this cluster's gateway a new WireGuard key: the gateway switches to it live, the
    /// peers learn its public half and reconnect; waits until every peer is connected again.
    RotateKey {
        /// How long to wait for the new key and for every peer to reconnect.
        #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
        timeout: Duration,
    },
    /// Print the version.
    Version {
        /// Only the client's version (do not contact the cluster).
        #[arg(long)]
        client: bool,
    },
    /// Print a shell completion script.
    Completion {
        /// The shell.
        shell: Shell,
    },
}

/// `generate ...`.
#[derive(Debug, Subcommand)]
pub enum Generate {
    /// Print the command a *different* cluster runs to peer with this one.
    PeerCommand {
        /// Print only the command (to pipe it to a shell).
        #[arg(long)]
        only_command: bool,
    },
}

/// `peer <name>` or `peer out-of-band ...`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct PeerArgs {
    /// Out-of-band peering (the remote cluster's auth service and API server are reachable).
    #[command(subcommand)]
    pub mode: Option<PeerMode>,
    /// Enable the outgoing peering of an existing ForeignCluster (the reverse direction of a
    /// peering the remote cluster established).
    #[arg(required = true, value_name = "NAME")]
    pub name: Option<ObjectName>,
    /// How long to wait for the peering.
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// `peer` modes.
#[derive(Debug, Subcommand)]
pub enum PeerMode {
    /// Peer with a remote cluster using the command `generate peer-command` printed there.
    #[command(name = "out-of-band", visible_alias = "oob")]
    OutOfBand(PeerOutOfBand),
    /// Peer with a remote cluster whose auth service and API server are reachable only through
    /// the tunnel: liqoctl, holding both clusters' kubeconfigs, builds the tunnel first.
    #[command(name = "in-band", visible_alias = "ib")]
    InBand(PeerInBand),
}

/// The remote cluster of `peer in-band` and `unpeer in-band`, and both IPAMs.
#[derive(Debug, Args)]
pub struct Remote {
    /// Path to the remote cluster's kubeconfig (default: as --kubeconfig).
    #[arg(long, value_name = "PATH")]
    pub remote_kubeconfig: Option<PathBuf>,
    /// The remote kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub remote_context: Option<String>,
    /// The namespace where Liqo is installed in the remote cluster.
    #[arg(long, default_value = objects::LIQO_NAMESPACE)]
    pub remote_namespace: NamespaceName,
    /// The local cluster's IPAM (liqo-ipam's gRPC address, http://host:port), to map the
    /// local auth service and proxy for the remote cluster.
    #[arg(long, value_name = "URL", value_parser = parse_ipam_address)]
    pub ipam_address: String,
    /// The remote cluster's IPAM (as --ipam-address).
    #[arg(long, value_name = "URL", value_parser = parse_ipam_address)]
    pub remote_ipam_address: String,
}

/// `peer in-band --remote-kubeconfig ... [--bidirectional] [--timeout]`.
#[derive(Debug, Args)]
pub struct PeerInBand {
    /// The remote cluster.
    #[command(flatten)]
    pub remote: Remote,
    /// Also enable the peering from the remote cluster to this one.
    #[arg(long)]
    pub bidirectional: bool,
    /// How long to wait for the peering.
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// An IPAM address: `http://host:port` or `https://host:port`.
pub fn parse_ipam_address(s: &str) -> Result<String, String> {
    let url: AuthUrl = s
        .parse()
        .map_err(|e: InvalidAuthUrl| format!("{e} (e.g. http://10.0.0.5:6000)"))?;
    let has_port = url
        .as_str()
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok());
    if !has_port {
        return Err("has no port (e.g. http://10.0.0.5:6000)".into());
    }
    Ok(url.as_str().to_owned())
}

/// `peer out-of-band <name> --auth-url --cluster-id --auth-token [--timeout]`.
#[derive(Debug, Args)]
pub struct PeerOutOfBand {
    /// The remote cluster's name (the ForeignCluster's and the virtual node's).
    #[arg(value_name = "NAME")]
    pub name: ClusterName,
    /// The remote cluster's auth service (https://host[:port]).
    #[arg(long)]
    pub auth_url: AuthUrl,
    /// The remote cluster's ID.
    #[arg(long)]
    pub cluster_id: ClusterId,
    /// The remote cluster's auth token (128 hex digits). On a shared machine prefer the
    /// environment variable: a flag is visible to other users in the process list.
    #[arg(long, env = "LIQO_AUTH_TOKEN", hide_env_values = true, value_parser = TokenParser)]
    pub auth_token: AuthToken,
    /// How long to wait for the peering.
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// `unpeer <name>` or `unpeer out-of-band <name>`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct UnpeerArgs {
    /// Out-of-band unpeering.
    #[command(subcommand)]
    pub mode: Option<UnpeerMode>,
    /// Disable the outgoing peering to this ForeignCluster.
    #[arg(required = true, value_name = "NAME")]
    pub name: Option<ObjectName>,
    /// How long to wait for the teardown.
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// `unpeer` modes.
#[derive(Debug, Subcommand)]
pub enum UnpeerMode {
    /// Disable an out-of-band peering (the reverse direction, if any, is kept).
    #[command(name = "out-of-band", visible_alias = "oob")]
    OutOfBand {
        /// The ForeignCluster.
        #[arg(value_name = "NAME")]
        name: ObjectName,
        /// How long to wait for the teardown.
        #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
        timeout: Duration,
    },
    /// Disable an in-band peering on both clusters and tear its tunnel down.
    #[command(name = "in-band", visible_alias = "ib")]
    InBand {
        /// The remote cluster.
        #[command(flatten)]
        remote: Remote,
        /// How long to wait for the teardown.
        #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
        timeout: Duration,
    },
}

/// A `--timeout` (`120s`, `2m`, `1m30s`); zero is refused.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (e.g. 120s, 2m, 1m30s)"))?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

/// An auth service's URL: `https://` (or `http://` for an auth service without TLS), a host,
/// an optional port and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUrl(String);

impl AuthUrl {
    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AuthUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a string is not an auth URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAuthUrl {
    /// Neither `https://` nor `http://`.
    #[error("does not start with https:// (or http://)")]
    Scheme,
    /// No host.
    #[error("has no host")]
    NoHost,
    /// A character a host cannot have.
    #[error("has {0:?} in its host")]
    HostChar(char),
    /// A port that is not 1..=65535.
    #[error("has port {0:?} (a port is 1 to 65535)")]
    Port(String),
    /// A path, query or fragment.
    #[error("has something after the host and port ({0:?}); an auth URL is scheme://host[:port]")]
    Trailing(String),
}

impl FromStr for AuthUrl {
    type Err = InvalidAuthUrl;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))
            .ok_or(InvalidAuthUrl::Scheme)?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, trailing) = rest.split_at(end);
        if !trailing.is_empty() && trailing != "/" {
            return Err(InvalidAuthUrl::Trailing(trailing.to_owned()));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (addr, after) = v6.split_once(']').ok_or(InvalidAuthUrl::HostChar('['))?;
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(InvalidAuthUrl::HostChar('['));
            }
            (addr, after.strip_prefix(':'))
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(InvalidAuthUrl::NoHost);
        }
        if !authority.starts_with('[')
            && let Some(c) = host
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
        {
            return Err(InvalidAuthUrl::HostChar(c));
        }
        if let Some(p) = port
            && !matches!(p.parse::<u16>(), Ok(1..))
        {
            return Err(InvalidAuthUrl::Port(p.to_owned()));
        }
        Ok(Self(s.trim_end_matches('/').to_owned()))
    }
}

/// Parses `--auth-token` without ever putting the token in the error (a mistyped token is
/// still most of a secret).
#[derive(Debug, Clone, Copy)]
pub struct TokenParser;

impl TypedValueParser for TokenParser {
    type Value = AuthToken;

    fn parse_ref(
        &self,
        cmd: &ClapCommand,
        arg: Option<&Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<AuthToken, ClapError> {
        let flag = arg.map_or_else(
            || "--auth-token".to_owned(),
            |a| format!("--{}", a.get_id()),
        );
        let bad = |why: String| {
            ClapError::raw(
                ErrorKind::ValueValidation,
                format!("invalid value for '{}': {why}\n", flag.replace('_', "-")),
            )
            .with_cmd(cmd)
        };
        let text = value.to_str().ok_or_else(|| bad("is not UTF-8".into()))?;
        AuthToken::from_str(text).map_err(|e| bad(e.to_string()))
    }
}

/// The program name to print in commands: `kubectl liqo` when run as the kubectl plugin
/// (`kubectl-liqo` on PATH), else `liqoctl`.
pub fn program_name(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let base = argv0
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if base == "kubectl-liqo" || base.starts_with("kubectl-liqo.") {
        "kubectl liqo"
    } else {
        "liqoctl"
    }
}

#[cfg(test)]
mod tests;

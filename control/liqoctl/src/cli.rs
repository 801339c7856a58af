//! The command line (clap derive): the global flags, the commands and their flags, each value
//! validated while parsing ([`values`]), so a bad flag is refused with an error naming it (and
//! its value, unless it is a token) before anything is read or written.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;
use control::{
    api::{ClusterId, ClusterName},
    consts::objects,
    identity::AuthToken,
    names::{NamespaceName, ObjectName},
};

pub mod values;

pub use crate::offload::args::{
    Offload, OffloadNamespace, OutputFormat, Unoffload, parse_selector,
};
pub use values::{
    AuthUrl, DEFAULT_TIMEOUT, InvalidAuthUrl, InvalidIpamAddress, InvalidTimeout, TokenParser,
    parse_ipam_address, parse_timeout,
};

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
    /// Move what Liqo manages between nodes.
    #[command(subcommand, name = "move")]
    Move(Move),
    /// Install or upgrade Liqo on this cluster (Helm, with the chart built into liqoctl).
    // `--version` is the chart's (the manual's flag), not liqoctl's.
    #[command(disable_version_flag = true)]
    Install(crate::install::args::InstallArgs),
    /// Remove Liqo from this cluster (refused while peered or offloading).
    Uninstall(crate::install::args::UninstallArgs),
    /// Show this cluster's identity, API server and auth URL, its network, each component's
    /// readiness and version, and its peerings.
    #[command(alias = "info")]
    Status {
        /// Print the report as data instead of text.
        #[arg(short, long, value_enum)]
        output: Option<OutputFormat>,
    },
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

/// `move ...`.
#[derive(Debug, Subcommand)]
pub enum Move {
    /// Move the data of a claim of class liqo to a node of this cluster (from a provider or
    /// another node): copied by two Jobs, verified file by file, then the claim re-bound to the
    /// copy and the original deleted. Refused while a pod mounts the claim. `-n/--namespace`
    /// names the claim's namespace.
    Volume(MoveVolumeArgs),
}

/// `move volume <claim> -n <namespace> --node <node>`.
#[derive(Debug, Args)]
pub struct MoveVolumeArgs {
    /// The claim (PersistentVolumeClaim) to move, in the namespace `-n/--namespace` names.
    #[arg(value_name = "CLAIM")]
    pub claim: ObjectName,
    /// The node of this cluster to move its data to.
    #[arg(long, visible_alias = "target-node", value_name = "NODE")]
    pub node: ObjectName,
    /// The namespace where Liqo is installed (its controller-manager's image runs the copy).
    #[arg(long, default_value = objects::LIQO_NAMESPACE)]
    pub liqo_namespace: NamespaceName,
    /// The image of the copy's Jobs (default: the controller-manager's, which holds
    /// liqo-mover).
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,
    /// How long the copy may take.
    #[arg(long, default_value = "10m", value_parser = parse_timeout)]
    pub timeout: Duration,
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
    /// Delete the claims of class liqo whose data lives on this peer (and that data) instead
    /// of refusing.
    #[arg(long)]
    pub delete_remote_volumes: bool,
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
        /// Delete the claims of class liqo whose data lives on this peer (and that data)
        /// instead of refusing.
        #[arg(long)]
        delete_remote_volumes: bool,
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
        /// Delete the claims of class liqo whose data lives on the other cluster (on either
        /// side, and that data) instead of refusing.
        #[arg(long)]
        delete_remote_volumes: bool,
    },
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

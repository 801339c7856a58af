//! `liqoctl install [kubeadm|kind|k3s|generic]` and `liqoctl uninstall`: the flags (the
//! manual's chapter 9), each value checked while parsing.

use std::{path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};
use control::api::{Cidr, ClusterName};

use crate::cli::parse_timeout;

/// Where the cluster runs: how its pod and service CIDRs are found when not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// kubeadm: the CIDRs from ConfigMap kube-system/kubeadm-config.
    Kubeadm,
    /// KinD (kubeadm inside): as kubeadm.
    Kind,
    /// K3s: its default pod CIDR (10.42.0.0/16: give --pod-cidr if the cluster was made with
    /// another) and the API server's service range.
    K3s,
    /// Any other distribution: kube-proxy's cluster CIDR and the API server's service range,
    /// or the flags.
    Generic,
}

/// The default of `install --timeout` (upstream's).
pub const INSTALL_TIMEOUT: &str = "10m";

/// `liqoctl install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The distribution (default: generic).
    #[arg(value_enum, default_value = "generic")]
    pub provider: Provider,
    /// The name identifying this cluster in Liqo (default: generated).
    #[arg(long)]
    pub cluster_name: Option<ClusterName>,
    /// Labels identifying this cluster in Liqo (`k=v,k2=v2`), given to the peers' virtual nodes.
    #[arg(long, value_parser = parse_labels_flag)]
    pub cluster_labels: Option<std::collections::BTreeMap<String, String>>,
    /// The maximum share of this cluster's free resources offered to each peer, in percent.
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub sharing_percentage: u8,
    /// Private CIDRs Liqo must never use to remap peers (e.g. the nodes' subnet); the pod and
    /// service CIDRs are reserved already. Comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_parser = parse_cidr)]
    pub reserved_subnets: Vec<Cidr>,
    /// The cluster's pod CIDR (default: detected).
    #[arg(long, value_parser = parse_cidr)]
    pub pod_cidr: Option<Cidr>,
    /// The cluster's service CIDR (default: detected).
    #[arg(long, value_parser = parse_cidr)]
    pub service_cidr: Option<Cidr>,
    /// The API server URL given to peers (default: the kubeconfig's).
    #[arg(long)]
    pub api_server_url: Option<String>,
    /// Two replicas of the controller manager electing a leader on a Lease (both serve the
    /// webhooks, the leader reconciles; a standby takes over within ~12 s), and two
    /// active/standby gateways on two nodes (the Service selects the active one; the standby
    /// takes over within seconds of the active gateway's death). Needs two schedulable nodes:
    /// with one, the second gateway stays Pending and the install waits for it.
    #[arg(long)]
    pub enable_ha: bool,
    /// Helm values (`key=value`, Helm's syntax), after liqoctl's own. Repeatable.
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// Print nothing to the cluster: write the values file and stop (`--dump-values-path`).
    #[arg(long)]
    pub only_output_values: bool,
    /// Where `--only-output-values` writes the values.
    #[arg(long, default_value = "./values.yaml")]
    pub dump_values_path: PathBuf,
    /// Render with what the cluster holds visible to the chart (Helm's `--dry-run=server`,
    /// Secrets hidden) and print it; create nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The chart's version; only the chart built into this liqoctl is available.
    #[arg(long)]
    pub version: Option<String>,
    /// A chart directory to install instead of the one built into liqoctl.
    #[arg(long)]
    pub local_chart_path: Option<PathBuf>,
    /// How long to wait for every component to be ready.
    #[arg(long, default_value = INSTALL_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// `liqoctl uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Also remove the CRDs (and so every Liqo object left).
    #[arg(long)]
    pub purge: bool,
    /// How long the removal may take.
    #[arg(long, default_value = INSTALL_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// A CIDR flag: an IPv4 network without host bits.
pub fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let net: ipnet::Ipv4Net = s
        .parse()
        .map_err(|e| format!("{s:?} is not an IPv4 CIDR: {e}"))?;
    Cidr::new(net)
        .and_then(Cidr::range)
        .map_err(|e| format!("{s:?}: {e}"))
}

fn parse_labels_flag(s: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    control::selector::parse_labels(s).map_err(|e| e.to_string())
}

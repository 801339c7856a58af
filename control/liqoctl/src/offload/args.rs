//! The command line of `offload namespace` and `unoffload namespace` (re-exported by
//! [`crate::cli`]): strategies by the API's own names, each `--selector` parsed by
//! `control::selector::parse_term` into one term, all checked while parsing.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum, builder::PossibleValuesParser, builder::TypedValueParser};
use control::{
    api::offloading::{NamespaceMappingStrategy, PodOffloadingStrategy},
    names::NamespaceName,
    selector::SelectorError,
};
use k8s_openapi::api::core::v1::NodeSelectorTerm;

use crate::cli::values::{DEFAULT_TIMEOUT, parse_timeout};

/// The default `--timeout` of `offload namespace` (upstream's).
pub const OFFLOAD_TIMEOUT: &str = "20s";

/// `offload ...`.
#[derive(Debug, Subcommand)]
pub enum Offload {
    /// Offload a namespace: create or update its NamespaceOffloading and wait until the
    /// remote namespaces are ready.
    #[command(visible_alias = "ns")]
    Namespace(OffloadNamespace),
}

/// `offload namespace <ns> [flags]`.
#[derive(Debug, Args)]
pub struct OffloadNamespace {
    /// The namespace to offload.
    #[arg(value_name = "NAMESPACE")]
    pub name: NamespaceName,
    /// How remote namespaces are named: DefaultName (`<ns>-<local cluster's unique name>`)
    /// or EnforceSameName (the local name). Immutable once offloaded.
    #[arg(
        long,
        default_value = "DefaultName",
        value_parser = PossibleValuesParser::new(["DefaultName", "EnforceSameName"])
            .try_map(|s| strategy::<NamespaceMappingStrategy>(&s)),
    )]
    pub namespace_mapping_strategy: NamespaceMappingStrategy,
    /// Where the namespace's pods may run: LocalAndRemote, Local (local nodes only) or Remote
    /// (virtual nodes only).
    #[arg(
        long,
        default_value = "LocalAndRemote",
        value_parser = PossibleValuesParser::new(["LocalAndRemote", "Local", "Remote"])
            .try_map(|s| strategy::<PodOffloadingStrategy>(&s)),
    )]
    pub pod_offloading_strategy: PodOffloadingStrategy,
    /// The clusters to offload to, by their virtual nodes' labels, in kubectl's selector
    /// syntax (`k=v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`; commas AND). Repeat the
    /// flag to OR selectors. None: every peered cluster.
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR", value_parser = parse_selector)]
    pub selectors: Vec<NodeSelectorTerm>,
    /// Print the NamespaceOffloading instead of creating it (no cluster is contacted).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
    /// How long to wait for the offloading.
    #[arg(long, default_value = OFFLOAD_TIMEOUT, value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// `unoffload ...`.
#[derive(Debug, Subcommand)]
pub enum Unoffload {
    /// Disable the offloading of a namespace: delete its NamespaceOffloading and wait until
    /// it, and the remote namespaces, are gone.
    #[command(visible_alias = "ns")]
    Namespace {
        /// The offloaded namespace.
        #[arg(value_name = "NAMESPACE")]
        name: NamespaceName,
        /// How long to wait for the teardown.
        #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = parse_timeout)]
        timeout: Duration,
        /// Delete the namespace's claims of class liqo whose data lives on a provider (and
        /// that data) instead of refusing.
        #[arg(long)]
        delete_remote_volumes: bool,
    },
}

/// What `-o` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

/// A strategy by the API's own names (the possible values are checked by clap first).
fn strategy<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::Value::String(s.to_owned()))
}

/// One `--selector`: one term of the cluster selector (its requirements ANDed); the error
/// names the requirement at fault.
pub fn parse_selector(s: &str) -> Result<NodeSelectorTerm, SelectorError> {
    control::selector::parse_term(s)
}

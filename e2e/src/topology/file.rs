//! The topology file format (YAML, camelCase keys) as written by people, before validation.
//!
//! CIDRs, names and numbers are kept raw (strings, `i64`) so that validation, not the YAML
//! parser, judges them and can name the offending field by its path.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::{plan::Topology, rules::TopologyError};

/// A whole topology file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TopologyFile {
    #[serde(default)]
    pub(super) wan: Option<WanFile>,
    #[serde(default)]
    pub(super) clusters: Vec<ClusterFile>,
}

/// The `wan` section.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct WanFile {
    #[serde(default)]
    pub(super) cidr: Option<String>,
}

/// One entry of `clusters`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ClusterFile {
    pub(super) name: String,
    #[serde(rename = "podCIDR")]
    pub(super) pod_cidr: String,
    #[serde(rename = "serviceCIDR", default)]
    pub(super) service_cidr: Option<String>,
    #[serde(rename = "nodeCIDR", default)]
    pub(super) node_cidr: Option<String>,
    #[serde(default)]
    pub(super) reserved_subnets: Vec<String>,
    #[serde(default)]
    pub(super) node_slice_prefix: Option<i64>,
    #[serde(default)]
    pub(super) pods_per_node: Option<i64>,
    /// Put the gateway node's WAN side behind a masquerading router.
    #[serde(default)]
    pub(super) behind_nat: bool,
    pub(super) nodes: NodesFile,
}

/// `nodes`: either a count (nodes named `n0`, `n1`, ...) or an explicit list.
///
/// Deserialised by hand rather than with `#[serde(untagged)]`: an untagged enum reports any
/// problem inside a node list as "data did not match any variant", hiding e.g. which key is
/// unknown.
#[derive(Debug)]
pub(super) enum NodesFile {
    Count(i64),
    List(Vec<NodeFile>),
}

/// One entry of an explicit node list.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NodeFile {
    pub(super) name: String,
    #[serde(default)]
    pub(super) pod_slice: Option<String>,
    #[serde(default)]
    pub(super) pods: Option<i64>,
}

impl<'de> Deserialize<'de> for NodesFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodesVisitor;

        impl<'de> Visitor<'de> for NodesVisitor {
            type Value = NodesFile;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a node count or a list of nodes")
            }

            fn visit_i64<E: de::Error>(self, count: i64) -> Result<NodesFile, E> {
                Ok(NodesFile::Count(count))
            }

            fn visit_u64<E: de::Error>(self, count: u64) -> Result<NodesFile, E> {
                i64::try_from(count)
                    .map(NodesFile::Count)
                    .map_err(|_| E::custom(format!("node count {count} is too large")))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodesFile, A::Error> {
                let mut nodes = Vec::new();
                while let Some(node) = seq.next_element()? {
                    nodes.push(node);
                }
                Ok(NodesFile::List(nodes))
            }
        }

        deserializer.deserialize_any(NodesVisitor)
    }
}

/// Parses the YAML text; syntax and shape errors (unknown key, wrong type) get field `<file>`
/// and the parser's message, which carries the line and column.
pub(super) fn parse(text: &str) -> Result<TopologyFile, TopologyError> {
    serde_saphyr::from_str(text).map_err(|err| {
        let message = err.without_snippet().to_string();
        let message = message.strip_prefix("error: ").unwrap_or(&message);
        liqo_types::field::bad("<file>", message.trim())
    })
}

/// Writes a plan back in the file format: every value explicit, nodes as a list.
///
/// Names are quoted so that names like `true` or `null` stay strings.
pub(super) fn render(topology: &Topology) -> String {
    let mut lines = vec![
        "wan:".to_owned(),
        format!("  cidr: {}", topology.wan_cidr),
        "clusters:".to_owned(),
    ];
    for cluster in &topology.clusters {
        let reserved: Vec<String> = cluster
            .reserved_subnets
            .iter()
            .map(|s| s.to_string())
            .collect();
        lines.extend([
            format!("  - name: \"{}\"", cluster.name),
            format!("    podCIDR: {}", cluster.pod_cidr),
            format!("    serviceCIDR: {}", cluster.service_cidr),
            format!("    nodeCIDR: {}", cluster.node_cidr),
            format!("    reservedSubnets: [{}]", reserved.join(", ")),
            format!("    behindNat: {}", cluster.behind_nat),
            "    nodes:".to_owned(),
        ]);
        for node in &cluster.nodes {
            lines.extend([
                format!("      - name: \"{}\"", node.name),
                format!("        podSlice: {}", node.pod_slice),
                format!("        pods: {}", node.pods.len()),
            ]);
        }
    }
    lines.push(String::new());
    lines.join("\n")
}

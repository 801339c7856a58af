//! The route operator's decisions, pure: the cluster's nodes as the overlay knows them (from
//! Node objects), the gateway's node (from the Lease), and one agent's config file from its
//! base settings and the core's [`plan::overlay`]. A peer whose ranges the agent would refuse
//! (they overlap a node's pods) is left out with the field named; the others stay.

use std::{collections::BTreeMap, net::Ipv4Addr};

use super::plan::{self, NodeOverlay, Peerings, Refusal};
use crate::consts::{labels, values};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use liqo_overlay_api::config::File;
use liqo_types::{Cidr, ClusterId, FieldError, OverlayNode, field::bad};

/// Why a Node has no entry in the overlay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoEntry {
    /// A virtual node (a remote cluster).
    #[error("a virtual node")]
    Virtual,
    /// No IPv4 InternalIP.
    #[error("no IPv4 InternalIP")]
    NoAddress,
    /// No `spec.podCIDR` yet.
    #[error("no spec.podCIDR yet")]
    NoPodCidr,
    /// Pod CIDRs, none of them IPv4.
    #[error("no IPv4 pod CIDR in {0:?}")]
    NoIpv4PodCidr(Vec<String>),
}

/// The overlay's entry for a Node, or why it has none: a virtual node (a remote cluster), no
/// IPv4 InternalIP, no IPv4 `spec.podCIDR` yet.
pub fn node_entry(n: &Node) -> Result<OverlayNode, NoEntry> {
    let name = n.metadata.name.clone().unwrap_or_default();
    if n.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::NODE_TYPE))
        .is_some_and(|t| t == values::VIRTUAL_NODE)
    {
        return Err(NoEntry::Virtual);
    }
    let address: Ipv4Addr = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .find_map(|a| a.address.parse().ok())
        .ok_or(NoEntry::NoAddress)?;
    let spec = n.spec.as_ref();
    let cidrs = spec
        .and_then(|s| s.pod_cidrs.clone())
        .filter(|c| !c.is_empty())
        .or_else(|| spec.and_then(|s| s.pod_cidr.clone()).map(|c| vec![c]))
        .ok_or(NoEntry::NoPodCidr)?;
    let pod_cidr: Cidr = cidrs
        .iter()
        .find_map(|c| c.parse().ok())
        .ok_or_else(|| NoEntry::NoIpv4PodCidr(cidrs.clone()))?;
    Ok(OverlayNode {
        name,
        address,
        pod_cidr,
    })
}

/// The overlay's nodes, and why each other Node is left out (by name).
pub fn overlay_nodes(nodes: &[Node]) -> (Vec<OverlayNode>, BTreeMap<String, NoEntry>) {
    let mut out = Vec::new();
    let mut skipped = BTreeMap::new();
    for n in nodes {
        match node_entry(n) {
            Ok(e) => out.push(e),
            Err(why) => {
                skipped.insert(n.metadata.name.clone().unwrap_or_default(), why);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    (out, skipped)
}

/// The node the gateway runs on: the Lease's holder.
pub fn lease_holder(l: &Lease) -> Option<String> {
    l.spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// One agent's rendered config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The file.
    pub file: File,
    /// Its exact text.
    pub text: String,
    /// The peers left out, with the field the agent would refuse.
    pub refused: BTreeMap<ClusterId, FieldError>,
}

/// Why no config could be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The plan was refused (the gateway's node is not one of the nodes).
    #[error("planning the overlay")]
    Plan(#[source] Refusal),
    /// This node is not one of the overlay's nodes.
    #[error("node {node} is not in the overlay: {why}")]
    NotANode {
        /// The node.
        node: String,
        /// Why.
        why: String,
    },
    /// The base config (with the nodes) is refused by the agent's validation.
    #[error("the overlay's base config with the cluster's nodes")]
    Base(#[source] FieldError),
    /// The base config names nodes or ranges: they come from the cluster.
    #[error("the overlay's base config sets {0}; it comes from the cluster")]
    BaseSets(&'static str),
    /// Encoding failed.
    #[error("encoding the overlay's config")]
    Encode(#[source] serde_saphyr::ser::Error),
}

/// Node `me`'s agent config: `base` (fixed settings) with the nodes, the gateway's node and the
/// remote ranges of [`plan::overlay`] for these peerings.
pub fn render(
    base: &File,
    cluster: &ClusterId,
    me: &str,
    nodes: &[OverlayNode],
    gateway_node: &str,
    peerings: &Peerings,
) -> Result<Rendered, RenderError> {
    if !base.nodes.is_empty() {
        return Err(RenderError::BaseSets("nodes"));
    }
    if !base.remote_cidrs.is_empty() {
        return Err(RenderError::BaseSets("remoteCIDRs"));
    }
    let mut peers = peerings.clone();
    let mut refused = BTreeMap::new();
    loop {
        let plan =
            plan::overlay(cluster, nodes, gateway_node, &peers).map_err(RenderError::Plan)?;
        let mine = plan
            .per_node()
            .into_iter()
            .find(|n| n.node == me)
            .ok_or_else(|| RenderError::NotANode {
                node: me.into(),
                why: "no Node of that name with an InternalIP and a pod CIDR".into(),
            })?;
        let file = overlay_file(base, &mine);
        let e = match file.validate() {
            Ok(_) => {
                let text = serde_saphyr::to_string(&file).map_err(RenderError::Encode)?;
                return Ok(Rendered {
                    file,
                    text,
                    refused,
                });
            }
            Err(e) => e,
        };
        let bad_range = e
            .field
            .strip_prefix("remoteCIDRs[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| file.remote_cidrs.get(i).copied());
        let Some(range) = bad_range else {
            return Err(RenderError::Base(e));
        };
        let culprits: Vec<ClusterId> = peers
            .iter()
            .filter(|(_, p)| p.view.remote_ranges().contains(&range))
            .map(|(id, _)| id.clone())
            .collect();
        if culprits.is_empty() {
            return Err(RenderError::Base(e));
        }
        for id in culprits {
            peers.remove(&id);
            refused.insert(
                id,
                bad(
                    "spec.remoteNATPodCIDR/remoteNATExternalCIDR",
                    format!("the overlay refuses {range}: {}", e.problem),
                ),
            );
        }
    }
}

/// One agent's file: `base` with the plan's nodes, gateway node and remote ranges.
pub fn overlay_file(
    base: &liqo_overlay_api::config::File,
    n: &NodeOverlay,
) -> liqo_overlay_api::config::File {
    liqo_overlay_api::config::File {
        node: n.node.clone(),
        gateway: n.gateway_node.clone(),
        nodes: n.nodes.clone(),
        remote_cidrs: n.remote_cidrs.clone(),
        ..base.clone()
    }
}

#[cfg(test)]
mod tests;

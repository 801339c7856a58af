//! Validation of a cluster's nodes: names, pod slices and pod counts.

use ipnet::Ipv4Net;

use super::file::{ClusterFile, NodesFile};
use super::name::Name;
use super::plan::{Node, host_room, overlaps, size};
use super::rules::{MAX_NODES_PER_CLUSTER, TopologyError, parse_cidr, parse_name};

const DEFAULT_NODE_SLICE_PREFIX: i64 = 24;
const DEFAULT_PODS_PER_NODE: i64 = 2;
/// Longest node slice: network, bridge, one pod, broadcast.
const MAX_NODE_SLICE_PREFIX: u8 = 30;

/// A node as declared, before its slice and addresses are computed.
struct NodeSpec {
    name: Name,
    /// The explicit `podSlice`, if any.
    slice: Option<Ipv4Net>,
    pods: u32,
    /// Path of the node in the file: `clusters[i].nodes[j]`, or `clusters[i].nodes` for a count.
    path: String,
    /// Path of the field the pod count came from (`...nodes[j].pods` or `...podsPerNode`).
    pods_field: String,
}

/// Validates the cluster's `nodes` and plans each node's slice, addresses and pods.
pub(super) fn resolve_nodes(
    path: &str,
    file: &ClusterFile,
    pod_cidr: Ipv4Net,
    node_cidr: Ipv4Net,
) -> Result<Vec<Node>, TopologyError> {
    let specs = node_specs(path, file, pod_cidr)?;
    let room = host_room(node_cidr);
    if specs.len() as u64 > room {
        return Err(liqo_types::field::bad(
            format!("{path}.nodeCIDR"),
            format!(
                "{node_cidr} has room for {room} node addresses, but {} nodes are declared",
                specs.len()
            ),
        ));
    }
    let slices = pod_slices(path, file, pod_cidr, &specs)?;

    let mut nodes = Vec::with_capacity(specs.len());
    for (index, (spec, slice)) in specs.into_iter().zip(slices).enumerate() {
        let usable = size(slice).saturating_sub(3);
        if u64::from(spec.pods) > usable {
            return Err(liqo_types::field::bad(
                spec.pods_field,
                format!(
                    "{} pods do not fit in the pod slice {slice} of node {}: at most {usable} \
                     (the slice also holds its network, bridge and broadcast addresses)",
                    spec.pods, spec.name
                ),
            ));
        }
        nodes.push(Node::plan(
            spec.name,
            index as u32,
            node_cidr,
            slice,
            spec.pods,
        ));
    }
    Ok(nodes)
}

/// Reads `nodes` (count or list) with names, explicit slices and pod counts checked.
fn node_specs(
    path: &str,
    file: &ClusterFile,
    pod_cidr: Ipv4Net,
) -> Result<Vec<NodeSpec>, TopologyError> {
    let per_node_field = format!("{path}.podsPerNode");
    let per_node = pod_count(
        &per_node_field,
        file.pods_per_node.unwrap_or(DEFAULT_PODS_PER_NODE),
    )?;
    let nodes_field = format!("{path}.nodes");
    let count = match &file.nodes {
        NodesFile::Count(count) => *count,
        NodesFile::List(list) => list.len() as i64,
    };
    if !(1..=MAX_NODES_PER_CLUSTER as i64).contains(&count) {
        return Err(liqo_types::field::bad(
            nodes_field,
            format!("{count} nodes declared, but a cluster needs 1 to {MAX_NODES_PER_CLUSTER}"),
        ));
    }

    let list = match &file.nodes {
        NodesFile::List(list) => list,
        NodesFile::Count(_) => {
            let named = (0..count).map(|i| parse_name(&nodes_field, &format!("n{i}")));
            return named
                .map(|name| {
                    Ok(NodeSpec {
                        name: name?,
                        slice: None,
                        pods: per_node,
                        path: nodes_field.clone(),
                        pods_field: per_node_field.clone(),
                    })
                })
                .collect();
        }
    };

    let mut specs: Vec<NodeSpec> = Vec::new();
    for (j, node) in list.iter().enumerate() {
        let node_path = format!("{nodes_field}[{j}]");
        let name = parse_name(&format!("{node_path}.name"), &node.name)?;
        if let Some(why) = match name.as_str() {
            "lan" => Some("the cluster LAN"),
            "gw" => Some("the gateway's namespace"),
            "nat" => Some("the NAT router"),
            _ => None,
        } {
            return Err(liqo_types::field::bad(
                format!("{node_path}.name"),
                format!("\"{name}\" is reserved for {why}"),
            ));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(liqo_types::field::bad(
                format!("{node_path}.name"),
                format!("duplicate node name \"{name}\""),
            ));
        }
        let slice = match &node.pod_slice {
            Some(text) => Some(explicit_slice(
                &format!("{node_path}.podSlice"),
                text,
                pod_cidr,
            )?),
            None => None,
        };
        let (pods, pods_field) = match node.pods {
            Some(pods) => {
                let field = format!("{node_path}.pods");
                (pod_count(&field, pods)?, field)
            }
            None => (per_node, per_node_field.clone()),
        };
        specs.push(NodeSpec {
            name,
            slice,
            pods,
            path: node_path,
            pods_field,
        });
    }
    Ok(specs)
}

/// Parses an explicit `podSlice` and checks it lies in the pod CIDR and can hold a pod.
fn explicit_slice(field: &str, text: &str, pod_cidr: Ipv4Net) -> Result<Ipv4Net, TopologyError> {
    let slice = parse_cidr(field, text)?;
    if !pod_cidr.contains(&slice) {
        return Err(liqo_types::field::bad(
            field,
            format!("{slice} is not inside podCIDR {pod_cidr}"),
        ));
    }
    if slice.prefix_len() > MAX_NODE_SLICE_PREFIX {
        return Err(liqo_types::field::bad(
            field,
            format!(
                "{slice} is too small: a node slice is at most /{MAX_NODE_SLICE_PREFIX} \
                 (network, bridge, one pod, broadcast)"
            ),
        ));
    }
    Ok(slice)
}

/// The pod slice of every node: the explicit one, or the `j`-th `/nodeSlicePrefix` of the pod
/// CIDR for node `j`. Slices must not overlap.
fn pod_slices(
    path: &str,
    file: &ClusterFile,
    pod_cidr: Ipv4Net,
    specs: &[NodeSpec],
) -> Result<Vec<Ipv4Net>, TopologyError> {
    // The prefix is checked when written or used, not otherwise, so that a file with only
    // explicit slices (as `to_yaml` writes them) does not depend on its default.
    if file.node_slice_prefix.is_some() {
        slice_prefix(path, file.node_slice_prefix, pod_cidr)?;
    }
    let mut slices: Vec<Ipv4Net> = Vec::with_capacity(specs.len());
    for (j, spec) in specs.iter().enumerate() {
        let slice = match spec.slice {
            Some(slice) => slice,
            None => {
                let prefix = slice_prefix(path, file.node_slice_prefix, pod_cidr)?;
                default_slice(path, pod_cidr, prefix, j, specs.len())?
            }
        };
        for (k, earlier) in slices.iter().enumerate() {
            if overlaps(slice, *earlier) {
                // Say which of the two slices were defaulted rather than written.
                let ours = if spec.slice.is_some() {
                    ""
                } else {
                    "default slice "
                };
                let theirs = if specs[k].slice.is_some() {
                    "podSlice"
                } else {
                    "default slice"
                };
                return Err(liqo_types::field::bad(
                    format!("{}.podSlice", spec.path),
                    format!("{ours}{slice} overlaps nodes[{k}].{theirs} {earlier}"),
                ));
            }
        }
        slices.push(slice);
    }
    Ok(slices)
}

/// Checks `nodeSlicePrefix` (or its default) against the pod CIDR.
fn slice_prefix(path: &str, given: Option<i64>, pod_cidr: Ipv4Net) -> Result<u8, TopologyError> {
    let prefix = given.unwrap_or(DEFAULT_NODE_SLICE_PREFIX);
    let field = format!("{path}.nodeSlicePrefix");
    if prefix < i64::from(pod_cidr.prefix_len()) {
        return Err(liqo_types::field::bad(
            field,
            format!("/{prefix} is wider than podCIDR {pod_cidr}: a node slice must fit inside it"),
        ));
    }
    match u8::try_from(prefix) {
        Ok(prefix) if prefix <= MAX_NODE_SLICE_PREFIX => Ok(prefix),
        _ => Err(liqo_types::field::bad(
            field,
            format!(
                "/{prefix} is too long: a node slice is at most /{MAX_NODE_SLICE_PREFIX} \
                 (network, bridge, one pod, broadcast)"
            ),
        )),
    }
}

/// The `j`-th `/prefix` slice of the pod CIDR; `nodes` is the cluster's node count.
fn default_slice(
    path: &str,
    pod_cidr: Ipv4Net,
    prefix: u8,
    j: usize,
    nodes: usize,
) -> Result<Ipv4Net, TopologyError> {
    let slice = pod_cidr
        .subnets(prefix)
        .ok()
        .and_then(|mut subnets| subnets.nth(j));
    slice.ok_or_else(|| {
        let fit = 1u64 << (prefix - pod_cidr.prefix_len());
        liqo_types::field::bad(
            format!("{path}.nodes"),
            format!(
                "podCIDR {pod_cidr} cut into /{prefix} slices fits only {fit} nodes, \
                 but {nodes} are declared"
            ),
        )
    })
}

/// Checks a pod count read from `field` (`podsPerNode` or a node's `pods`).
fn pod_count(field: &str, pods: i64) -> Result<u32, TopologyError> {
    u32::try_from(pods).map_err(|_| {
        liqo_types::field::bad(
            field,
            format!("{pods} is not a pod count: it must be at least 0"),
        )
    })
}

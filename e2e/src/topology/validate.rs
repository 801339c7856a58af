//! Validation: turns a [`TopologyFile`] into a [`Topology`], checking every rule first.
//!
//! Errors name the offending field by its path in the file (`clusters[0].nodes[1].podSlice`).
//! Clusters may overlap each other (that is the product's point); within one cluster the pod,
//! service and node CIDRs and the reserved subnets must be disjoint.

use ipnet::Ipv4Net;

use super::file::{ClusterFile, TopologyFile};
use super::name::Name;
use super::nodes::resolve_nodes;
use super::plan::{Cluster, Topology, host, host_room, overlaps};
use super::rules::{MAX_TOTAL_PODS, TopologyError, parse_cidr, parse_name};

const DEFAULT_WAN_CIDR: &str = "198.18.0.0/24";
const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";
const DEFAULT_NODE_CIDR: &str = "172.18.0.0/24";

/// Validates the file and computes every address.
pub(super) fn resolve(file: TopologyFile) -> Result<Topology, TopologyError> {
    let wan_cidr = parse_cidr(
        "wan.cidr",
        file.wan
            .and_then(|wan| wan.cidr)
            .as_deref()
            .unwrap_or(DEFAULT_WAN_CIDR),
    )?;
    if file.clusters.is_empty() {
        return Err(liqo_types::field::bad(
            "clusters",
            "at least one cluster is required",
        ));
    }
    let room = host_room(wan_cidr);
    if file.clusters.len() as u64 > room {
        return Err(liqo_types::field::bad(
            "wan.cidr",
            format!(
                "{wan_cidr} has room for {room} gateway addresses, but {} clusters are declared",
                file.clusters.len()
            ),
        ));
    }

    let mut clusters: Vec<Cluster> = Vec::new();
    for (index, cluster) in file.clusters.iter().enumerate() {
        let path = format!("clusters[{index}]");
        let name = parse_name(&format!("{path}.name"), &cluster.name)?;
        if name == "wan" {
            return Err(liqo_types::field::bad(
                format!("{path}.name"),
                "\"wan\" is reserved for the WAN segment",
            ));
        }
        if clusters.iter().any(|c| c.name == name) {
            return Err(liqo_types::field::bad(
                format!("{path}.name"),
                format!("duplicate cluster name \"{name}\""),
            ));
        }
        let wan_addr = host(wan_cidr, index as u32 + 1);
        clusters.push(resolve_cluster(&path, name, cluster, wan_cidr, wan_addr)?);
    }

    let total: usize = clusters.iter().map(|c| c.pods().count()).sum();
    if total > MAX_TOTAL_PODS {
        return Err(liqo_types::field::bad(
            "clusters",
            format!(
                "{total} pods declared in total, but at most {MAX_TOTAL_PODS} fit on one host \
                 (each pod is a network namespace)"
            ),
        ));
    }
    Ok(Topology { wan_cidr, clusters })
}

fn resolve_cluster(
    path: &str,
    name: Name,
    file: &ClusterFile,
    wan_cidr: Ipv4Net,
    wan_addr: Ipv4Net,
) -> Result<Cluster, TopologyError> {
    let pod_cidr = parse_cidr(&format!("{path}.podCIDR"), &file.pod_cidr)?;
    let service_cidr = parse_cidr(
        &format!("{path}.serviceCIDR"),
        file.service_cidr.as_deref().unwrap_or(DEFAULT_SERVICE_CIDR),
    )?;
    let node_cidr = parse_cidr(
        &format!("{path}.nodeCIDR"),
        file.node_cidr.as_deref().unwrap_or(DEFAULT_NODE_CIDR),
    )?;

    let own = [
        ("podCIDR", pod_cidr),
        ("serviceCIDR", service_cidr),
        ("nodeCIDR", node_cidr),
    ];
    for (i, &(field, net)) in own.iter().enumerate() {
        for &(other_field, other) in &own[..i] {
            if overlaps(net, other) {
                return Err(liqo_types::field::bad(
                    format!("{path}.{field}"),
                    format!("{net} overlaps {other_field} {other}"),
                ));
            }
        }
        if overlaps(net, wan_cidr) {
            return Err(liqo_types::field::bad(
                format!("{path}.{field}"),
                format!("{net} overlaps wan.cidr {wan_cidr}"),
            ));
        }
    }

    let mut reserved_subnets = Vec::new();
    for (j, text) in file.reserved_subnets.iter().enumerate() {
        let field = format!("{path}.reservedSubnets[{j}]");
        let subnet = parse_cidr(&field, text)?;
        if let Some((other_field, other)) = own.iter().find(|(_, other)| overlaps(subnet, *other)) {
            return Err(liqo_types::field::bad(
                field,
                format!("{subnet} overlaps {other_field} {other}"),
            ));
        }
        reserved_subnets.push(subnet);
    }

    let nodes = resolve_nodes(path, file, pod_cidr, node_cidr)?;

    Ok(Cluster {
        name,
        pod_cidr,
        service_cidr,
        node_cidr,
        reserved_subnets,
        wan_addr,
        behind_nat: file.behind_nat,
        nodes,
    })
}

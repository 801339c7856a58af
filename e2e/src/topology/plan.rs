//! The resolved plan: every cluster, node and pod with its addresses computed.
//!
//! The plan is plain data: it (de)serialises to JSON so the lab can store it in its state file.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::name::Name;

/// A validated topology with every address resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// The WAN segment all clusters' gateway nodes attach to.
    pub wan_cidr: Ipv4Net,
    /// The clusters, in file order.
    pub clusters: Vec<Cluster>,
}

/// One cluster: a LAN of nodes, each node with a slice of the pod CIDR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    pub name: Name,
    /// The cluster's pod network, cut into one slice per node.
    pub pod_cidr: Ipv4Net,
    /// The cluster's service network.
    pub service_cidr: Ipv4Net,
    /// The cluster LAN; node `i` has host `i + 1`.
    pub node_cidr: Ipv4Net,
    /// Subnets the IPAM must never hand out.
    pub reserved_subnets: Vec<Ipv4Net>,
    /// Address of the gateway node on the WAN, with the WAN prefix length: cluster `c` gets
    /// host `c + 1` of the WAN CIDR.
    pub wan_addr: Ipv4Net,
    /// Whether the gateway node reaches the WAN through a masquerading router (which then holds
    /// `wan_addr`); the node's side is 192.168.77.2/24.
    #[serde(default)]
    pub behind_nat: bool,
    /// The nodes; `nodes[0]` is the gateway node. A validated plan has at least one.
    pub nodes: Vec<Node>,
}

/// One node of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub name: Name,
    /// The node's share of the cluster's pod CIDR.
    pub pod_slice: Ipv4Net,
    /// Host `i + 1` of the cluster's node CIDR, with its prefix length.
    pub lan_addr: Ipv4Net,
    /// First host of the pod slice, with the slice's prefix length: the node's bridge and the
    /// pods' default gateway.
    pub bridge_addr: Ipv4Net,
    /// The node's pods, in index order.
    pub pods: Vec<Pod>,
}

/// One pod of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// `<node>-p<k>`, e.g. `n0-p0`. A plain string: it is composed, not chosen, so it is not a
    /// [`Name`] (it holds a dash).
    pub name: String,
    /// Host `k + 2` of the node's pod slice, with the slice's prefix length.
    pub addr: Ipv4Net,
}

impl Topology {
    /// The cluster with this name.
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

impl Cluster {
    /// The gateway node, `nodes[0]`.
    ///
    /// # Panics
    /// If the cluster has no nodes, which a validated plan never has.
    pub fn gateway(&self) -> &Node {
        &self.nodes[0]
    }

    /// The node with this name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Every pod of the cluster with its node, node by node.
    pub fn pods(&self) -> impl Iterator<Item = (&Node, &Pod)> {
        self.nodes
            .iter()
            .flat_map(|node| node.pods.iter().map(move |pod| (node, pod)))
    }
}

impl Node {
    /// Builds node `index` of a cluster with `pods` pods in `pod_slice`.
    ///
    /// The caller has checked that the node CIDR and the slice are big enough.
    pub(super) fn plan(
        name: Name,
        index: u32,
        node_cidr: Ipv4Net,
        pod_slice: Ipv4Net,
        pods: u32,
    ) -> Node {
        let pods = (0..pods)
            .map(|k| Pod {
                name: format!("{name}-p{k}"),
                addr: host(pod_slice, k + 2),
            })
            .collect();
        Node {
            lan_addr: host(node_cidr, index + 1),
            bridge_addr: host(pod_slice, 1),
            name,
            pod_slice,
            pods,
        }
    }
}

/// Host `n` of `net` (0 is the network address), with `net`'s prefix length.
pub(super) fn host(net: Ipv4Net, n: u32) -> Ipv4Net {
    let addr = Ipv4Addr::from(u32::from(net.network()).wrapping_add(n));
    Ipv4Net::new_assert(addr, net.prefix_len())
}

/// Number of addresses in `net`.
pub(super) fn size(net: Ipv4Net) -> u64 {
    1u64 << (32 - u32::from(net.prefix_len()))
}

/// Number of host addresses in `net` (all but the network and broadcast addresses).
pub(super) fn host_room(net: Ipv4Net) -> u64 {
    size(net).saturating_sub(2)
}

/// Whether two networks share any address.
pub(super) fn overlaps(a: Ipv4Net, b: Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

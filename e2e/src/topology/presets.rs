//! The built-in topologies, written in the file format so they go through the same parser and
//! validation as a user's file.

/// Names of the presets, in the order they are listed to users.
pub(super) const NAMES: &[&str] = &["one-cluster", "two-clusters", "three-clusters"];

/// One cluster, two nodes with two pods each.
const ONE_CLUSTER: &str = "
clusters:
  - name: rome
    podCIDR: 10.200.0.0/16
    nodes: 2
    podsPerNode: 2
";

/// Two clusters whose pod CIDRs overlap on purpose: remapping them is the product's point.
const TWO_CLUSTERS: &str = "
clusters:
  - name: rome
    podCIDR: 10.200.0.0/16
    nodes: 2
    podsPerNode: 2
  - name: milan
    podCIDR: 10.200.0.0/16
    nodes: 2
    podsPerNode: 2
";

/// Three clusters with the same pod CIDR, each with one reserved subnet.
const THREE_CLUSTERS: &str = "
clusters:
  - name: rome
    podCIDR: 10.200.0.0/16
    reservedSubnets: [10.201.0.0/16]
    nodes: 3
    podsPerNode: 2
  - name: milan
    podCIDR: 10.200.0.0/16
    reservedSubnets: [10.202.0.0/16]
    nodes: 3
    podsPerNode: 2
  - name: turin
    podCIDR: 10.200.0.0/16
    reservedSubnets: [10.203.0.0/16]
    nodes: 3
    podsPerNode: 2
";

/// The YAML text of the preset called `name`.
pub(super) fn yaml(name: &str) -> Option<&'static str> {
    match name {
        "one-cluster" => Some(ONE_CLUSTER),
        "two-clusters" => Some(TWO_CLUSTERS),
        "three-clusters" => Some(THREE_CLUSTERS),
        _ => None,
    }
}

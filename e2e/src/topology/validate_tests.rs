//! One test per validation rule, each asserting the path of the offending field.

use super::*;

/// Parses `yaml`, expecting a validation error, and returns it.
fn err(yaml: &str) -> TopologyError {
    match Topology::from_yaml(yaml) {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(err) => err,
    }
}

/// A one-cluster file whose cluster has `fields` (flow-style YAML) added.
fn one(fields: &str) -> String {
    format!("clusters:\n  - {{name: rome, podCIDR: 10.200.0.0/16, {fields}}}\n")
}

#[test]
fn at_least_one_cluster() {
    assert_eq!(err("clusters: []").field, "clusters");
    assert_eq!(err("wan: {cidr: 198.18.0.0/24}").field, "clusters");
}

#[test]
fn cluster_names_are_unique() {
    let e = err("clusters:
  - {name: rome, podCIDR: 10.200.0.0/16, nodes: 1}
  - {name: milan, podCIDR: 10.200.0.0/16, nodes: 1}
  - {name: rome, podCIDR: 10.200.0.0/16, nodes: 1}");
    assert_eq!(
        e.to_string(),
        "clusters[2].name: duplicate cluster name \"rome\""
    );
}

#[test]
fn node_names_are_unique_within_a_cluster() {
    let e = err(&one("nodes: [{name: n0}, {name: n0}]"));
    assert_eq!(e.field, "clusters[0].nodes[1].name");
    assert!(e.problem.contains("duplicate node name \"n0\""), "{e}");
    // Different clusters may reuse node names: the presets do.
    assert!(Topology::preset("two-clusters").is_ok());
}

#[test]
fn bad_cluster_names_are_rejected() {
    let e = err("clusters: [{name: Rome, podCIDR: 10.200.0.0/16, nodes: 1}]");
    assert_eq!(e.field, "clusters[0].name");
    assert!(e.problem.contains("start with a letter"), "{e}");
    let e = err("clusters: [{name: romeromeromer, podCIDR: 10.200.0.0/16, nodes: 1}]");
    assert_eq!(e.field, "clusters[0].name");
    assert!(e.problem.contains("longer than 12"), "{e}");
    let e = err("clusters: [{name: wan, podCIDR: 10.200.0.0/16, nodes: 1}]");
    assert_eq!(e.field, "clusters[0].name");
    assert!(e.problem.contains("reserved"), "{e}");
}

#[test]
fn bad_node_names_are_rejected() {
    let e = err(&one("nodes: [{name: n0}, {name: n-1}]"));
    assert_eq!(e.field, "clusters[0].nodes[1].name");
    assert!(e.problem.contains("no dashes"), "{e}");
    let e = err(&one("nodes: [{name: lan}]"));
    assert_eq!(e.field, "clusters[0].nodes[0].name");
    assert!(e.problem.contains("reserved"), "{e}");
}

#[test]
fn cidrs_must_parse() {
    let e = err("clusters:
  - {name: rome, podCIDR: 10.200.0.0/16, nodes: 1}
  - {name: milan, podCIDR: 10.200.0.0/16, nodes: [{name: n0, podSlice: 10.300.0.0/24}]}");
    assert_eq!(e.field, "clusters[1].nodes[0].podSlice");
    assert!(
        e.problem
            .starts_with("\"10.300.0.0/24\" is not an IPv4 CIDR"),
        "{e}"
    );
    for (fields, field) in [
        (
            "serviceCIDR: 10.96.0.0, nodes: 1",
            "clusters[0].serviceCIDR",
        ),
        ("nodeCIDR: lan, nodes: 1", "clusters[0].nodeCIDR"),
        (
            "reservedSubnets: [10.250.0.0/16, 10.251.0.0/33], nodes: 1",
            "clusters[0].reservedSubnets[1]",
        ),
    ] {
        assert_eq!(err(&one(fields)).field, field, "{fields}");
    }
    let e = err("clusters: [{name: rome, podCIDR: 'fd00::/64', nodes: 1}]");
    assert_eq!(e.field, "clusters[0].podCIDR");
    assert!(e.problem.contains("only IPv4"), "{e}");
    let e = err(&format!("wan: {{cidr: nowhere}}\n{}", one("nodes: 1")));
    assert_eq!(e.field, "wan.cidr");
}

#[test]
fn cidrs_must_not_have_host_bits() {
    let e = err("clusters: [{name: rome, podCIDR: 10.200.0.1/16, nodes: 1}]");
    assert_eq!(
        e.to_string(),
        "clusters[0].podCIDR: 10.200.0.1/16 has host bits set (did you mean 10.200.0.0/16?)"
    );
    for (fields, field) in [
        (
            "serviceCIDR: 10.96.0.1/12, nodes: 1",
            "clusters[0].serviceCIDR",
        ),
        ("nodeCIDR: 172.18.0.1/24, nodes: 1", "clusters[0].nodeCIDR"),
        (
            "reservedSubnets: [10.250.1.0/16], nodes: 1",
            "clusters[0].reservedSubnets[0]",
        ),
        (
            "nodes: [{name: n0, podSlice: 10.200.0.1/24}]",
            "clusters[0].nodes[0].podSlice",
        ),
    ] {
        let e = err(&one(fields));
        assert_eq!(e.field, field, "{fields}");
        assert!(e.problem.contains("host bits"), "{e}");
    }
    let e = err(&format!(
        "wan: {{cidr: 198.18.0.1/24}}\n{}",
        one("nodes: 1")
    ));
    assert_eq!(e.field, "wan.cidr");
}

#[test]
fn cluster_cidrs_must_not_overlap_each_other() {
    let e = err(&one("serviceCIDR: 10.200.128.0/20, nodes: 1"));
    assert_eq!(
        e.to_string(),
        "clusters[0].serviceCIDR: 10.200.128.0/20 overlaps podCIDR 10.200.0.0/16"
    );
    let e = err(&one("nodeCIDR: 10.96.0.0/24, nodes: 1"));
    assert_eq!(e.field, "clusters[0].nodeCIDR");
    assert!(e.problem.contains("serviceCIDR"), "{e}");
}

#[test]
fn reserved_subnets_must_not_overlap_cluster_cidrs() {
    let e = err(&one(
        "reservedSubnets: [10.250.0.0/16, 10.200.4.0/24], nodes: 1",
    ));
    assert_eq!(e.field, "clusters[0].reservedSubnets[1]");
    assert!(e.problem.contains("overlaps podCIDR 10.200.0.0/16"), "{e}");
    let e = err(&one("reservedSubnets: [10.0.0.0/8], nodes: 1"));
    assert_eq!(e.field, "clusters[0].reservedSubnets[0]");
    let e = err(&one("reservedSubnets: [172.18.0.0/16], nodes: 1"));
    assert!(e.problem.contains("nodeCIDR"), "{e}");
}

#[test]
fn clusters_may_overlap_each_other_but_not_the_wan() {
    let t = Topology::from_yaml(
        "clusters:
  - {name: rome, podCIDR: 10.200.0.0/16, reservedSubnets: [10.9.0.0/16], nodes: 1}
  - {name: milan, podCIDR: 10.9.0.0/16, nodes: 1}",
    )
    .unwrap();
    assert_eq!(t.clusters[0].node_cidr, t.clusters[1].node_cidr);
    let e = err(&one("nodeCIDR: 198.18.0.0/25, nodes: 1"));
    assert_eq!(e.field, "clusters[0].nodeCIDR");
    assert!(e.problem.contains("wan.cidr"), "{e}");
}

#[test]
fn node_slice_prefix_is_between_pod_cidr_prefix_and_30() {
    let e = err(&one("nodeSlicePrefix: 15, nodes: 1"));
    assert_eq!(e.field, "clusters[0].nodeSlicePrefix");
    let e = err(&one("nodeSlicePrefix: 31, nodes: 1"));
    assert_eq!(e.field, "clusters[0].nodeSlicePrefix");
    assert!(e.problem.contains("at most /30"), "{e}");
    // The default /24 does not fit a /25 pod CIDR.
    let e = err("clusters: [{name: rome, podCIDR: 10.200.0.0/25, nodes: 1}]");
    assert_eq!(e.field, "clusters[0].nodeSlicePrefix");
    // ...but it is not needed when every slice is explicit.
    let t = Topology::from_yaml(
        "clusters: [{name: rome, podCIDR: 10.200.0.0/25, nodes: [{name: n0, podSlice: 10.200.0.0/26}]}]",
    )
    .unwrap();
    assert_eq!(
        t.clusters[0].gateway().pod_slice.to_string(),
        "10.200.0.0/26"
    );
}

#[test]
fn pod_cidr_must_hold_the_default_slices() {
    let e = err(&one("nodeSlicePrefix: 17, nodes: 3"));
    assert_eq!(e.field, "clusters[0].nodes");
    assert!(
        e.problem.contains("fits only 2 nodes, but 3 are declared"),
        "{e}"
    );
    assert!(Topology::from_yaml(&one("nodeSlicePrefix: 17, nodes: 2")).is_ok());
}

#[test]
fn explicit_slices_lie_inside_the_pod_cidr() {
    let e = err(&one("nodes: [{name: n0, podSlice: 10.201.0.0/24}]"));
    assert_eq!(e.field, "clusters[0].nodes[0].podSlice");
    assert!(e.problem.contains("not inside podCIDR"), "{e}");
    let e = err(&one("nodes: [{name: n0, podSlice: 10.200.0.0/31}]"));
    assert_eq!(e.field, "clusters[0].nodes[0].podSlice");
}

#[test]
fn slices_must_not_overlap() {
    let e = err(&one(
        "nodes: [{name: n0, podSlice: 10.200.0.0/23}, {name: n1, podSlice: 10.200.0.0/24}]",
    ));
    assert_eq!(
        e.to_string(),
        "clusters[0].nodes[1].podSlice: 10.200.0.0/24 overlaps nodes[0].podSlice 10.200.0.0/23"
    );
    // n1 takes the default second /24, which n0 already holds.
    let e = err(&one(
        "nodes: [{name: n0, podSlice: 10.200.0.0/23}, {name: n1}]",
    ));
    assert_eq!(e.field, "clusters[0].nodes[1].podSlice");
    assert!(e.problem.starts_with("default slice 10.200.1.0/24"), "{e}");
}

#[test]
fn pod_counts_are_not_negative() {
    let e = err(&one("podsPerNode: -1, nodes: 1"));
    assert_eq!(e.field, "clusters[0].podsPerNode");
    let e = err(&one("nodes: [{name: n0, pods: -3}]"));
    assert_eq!(e.field, "clusters[0].nodes[0].pods");
    let t = Topology::from_yaml(&one("podsPerNode: 0, nodes: 1")).unwrap();
    assert!(t.clusters[0].gateway().pods.is_empty());
}

#[test]
fn pods_must_fit_the_slice() {
    let e = err(&one("podsPerNode: 254, nodes: 1"));
    assert_eq!(e.field, "clusters[0].podsPerNode");
    assert!(e.problem.contains("at most 253"), "{e}");
    assert!(Topology::from_yaml(&one("podsPerNode: 253, nodes: 1")).is_ok());
    let e = err(&one(
        "nodes: [{name: n0, podSlice: 10.200.0.0/30, pods: 2}]",
    ));
    assert_eq!(e.field, "clusters[0].nodes[0].pods");
    assert!(e.problem.contains("at most 1"), "{e}");
    // The default of 2 pods does not fit a /30 either, and the fix is podsPerNode.
    let e = err(&one("nodes: [{name: n0, podSlice: 10.200.0.0/30}]"));
    assert_eq!(e.field, "clusters[0].podsPerNode");
}

#[test]
fn node_count_is_between_1_and_64() {
    for nodes in ["0", "-1", "65", "[]"] {
        let e = err(&one(&format!(
            "nodeCIDR: 172.18.0.0/16, podsPerNode: 0, nodes: {nodes}"
        )));
        assert_eq!(e.field, "clusters[0].nodes", "nodes: {nodes}");
    }
    assert!(Topology::from_yaml(&one("podsPerNode: 0, nodes: 64")).is_ok());
}

#[test]
fn node_cidr_must_hold_every_node() {
    let e = err(&one("nodeCIDR: 172.18.0.0/30, nodes: 3"));
    assert_eq!(
        e.to_string(),
        "clusters[0].nodeCIDR: 172.18.0.0/30 has room for 2 node addresses, but 3 nodes are declared"
    );
    let t = Topology::from_yaml(&one("nodeCIDR: 172.18.0.0/30, nodes: 2")).unwrap();
    assert_eq!(t.clusters[0].nodes[1].lan_addr.to_string(), "172.18.0.2/30");
}

#[test]
fn wan_cidr_must_hold_every_cluster() {
    let e = err("wan: {cidr: 198.18.0.0/30}
clusters:
  - {name: rome, podCIDR: 10.200.0.0/16, nodes: 1}
  - {name: milan, podCIDR: 10.200.0.0/16, nodes: 1}
  - {name: turin, podCIDR: 10.200.0.0/16, nodes: 1}");
    assert_eq!(e.field, "wan.cidr");
    assert!(e.problem.contains("room for 2"), "{e}");
}

#[test]
fn total_pods_are_at_most_512() {
    let cluster = |name: &str, nodes: u32, pods: u32| {
        format!(
            "  - {{name: {name}, podCIDR: 10.200.0.0/16, podsPerNode: {pods}, nodes: {nodes}}}\n"
        )
    };
    // 2 x 64 nodes x 4 pods: exactly the limit.
    let full = format!(
        "clusters:\n{}{}",
        cluster("rome", 64, 4),
        cluster("milan", 64, 4)
    );
    let t = Topology::from_yaml(&full).unwrap();
    assert_eq!(
        t.clusters.iter().map(|c| c.pods().count()).sum::<usize>(),
        512
    );
    let e = err(&format!("{full}{}", cluster("turin", 1, 1)));
    assert_eq!(e.field, "clusters");
    assert!(e.problem.starts_with("513 pods declared in total"), "{e}");
    assert!(e.problem.contains("at most 512 fit on one host"), "{e}");
}

#[test]
fn lab_namespace_names_are_reserved_for_nodes() {
    for (name, why) in [("gw", "gateway"), ("nat", "NAT router"), ("lan", "LAN")] {
        let text = format!(
            "clusters:\n  - name: rome\n    podCIDR: 10.200.0.0/16\n    nodes:\n      - name: {name}\n"
        );
        let e = super::Topology::from_yaml(&text).unwrap_err();
        assert_eq!(e.field, "clusters[0].nodes[0].name");
        assert!(e.problem.contains(why), "{e}");
    }
}

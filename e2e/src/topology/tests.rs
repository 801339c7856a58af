//! Presets, the address plan, names and round trips.

use super::*;

fn net(text: &str) -> ipnet::Ipv4Net {
    text.parse().unwrap()
}

#[test]
fn two_clusters_preset_plans_every_address() {
    let t = Topology::preset("two-clusters").unwrap();
    assert_eq!(t.wan_cidr, net("198.18.0.0/24"));
    let names: Vec<&str> = t.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["rome", "milan"]);

    let rome = t.cluster("rome").unwrap();
    assert_eq!(rome.pod_cidr, net("10.200.0.0/16"));
    assert_eq!(rome.service_cidr, net("10.96.0.0/12"));
    assert_eq!(rome.node_cidr, net("172.18.0.0/24"));
    assert!(rome.reserved_subnets.is_empty());
    assert_eq!(rome.wan_addr, net("198.18.0.1/24"));
    assert_eq!(rome.nodes.len(), 2);
    assert_eq!(rome.gateway().name, "n0");
    assert_eq!(rome.gateway().lan_addr, net("172.18.0.1/24"));

    let n1 = rome.node("n1").unwrap();
    assert_eq!(n1.pod_slice, net("10.200.1.0/24"));
    assert_eq!(n1.bridge_addr, net("10.200.1.1/24"));
    assert_eq!(n1.lan_addr, net("172.18.0.2/24"));
    let pods: Vec<(&str, ipnet::Ipv4Net)> =
        n1.pods.iter().map(|p| (p.name.as_str(), p.addr)).collect();
    assert_eq!(
        pods,
        [
            ("n1-p0", net("10.200.1.2/24")),
            ("n1-p1", net("10.200.1.3/24"))
        ]
    );

    let milan = t.cluster("milan").unwrap();
    assert_eq!(milan.wan_addr, net("198.18.0.2/24"));
    assert_eq!(milan.pod_cidr, rome.pod_cidr, "the overlap is the point");
    assert_eq!(milan.node("n1").unwrap().pod_slice, n1.pod_slice);
    assert!(t.cluster("turin").is_none());
    assert!(rome.node("n2").is_none());
}

#[test]
fn three_clusters_preset_has_reserved_subnets() {
    let t = Topology::preset("three-clusters").unwrap();
    let summary: Vec<(&str, usize, usize, Vec<ipnet::Ipv4Net>)> = t
        .clusters
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.nodes.len(),
                c.pods().count(),
                c.reserved_subnets.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("rome", 3, 6, vec![net("10.201.0.0/16")]),
            ("milan", 3, 6, vec![net("10.202.0.0/16")]),
            ("turin", 3, 6, vec![net("10.203.0.0/16")]),
        ]
    );
    let turin = t.cluster("turin").unwrap();
    assert_eq!(turin.wan_addr, net("198.18.0.3/24"));
    assert_eq!(turin.node("n2").unwrap().pod_slice, net("10.200.2.0/24"));
    assert_eq!(turin.node("n2").unwrap().lan_addr, net("172.18.0.3/24"));
}

#[test]
fn one_cluster_preset_and_pods_iterator() {
    let t = Topology::preset("one-cluster").unwrap();
    assert_eq!(t.clusters.len(), 1);
    let rome = &t.clusters[0];
    let pods: Vec<String> = rome
        .pods()
        .map(|(node, pod)| format!("{}/{}", node.name, pod.name))
        .collect();
    assert_eq!(pods, ["n0/n0-p0", "n0/n0-p1", "n1/n1-p0", "n1/n1-p1"]);
}

#[test]
fn every_listed_preset_exists_and_unknown_names_list_them() {
    for name in Topology::preset_names() {
        assert!(Topology::preset(name).is_ok(), "preset {name}");
    }
    assert_eq!(Topology::preset_names().len(), 3);
    let err = Topology::preset("four-clusters").unwrap_err();
    assert_eq!(err.field, "preset");
    assert!(
        err.problem
            .contains("one-cluster, two-clusters, three-clusters"),
        "{err}"
    );
}

const CUSTOM: &str = "
wan:
  cidr: 192.0.2.0/28
clusters:
  - name: milan
    podCIDR: 10.200.0.0/16
    serviceCIDR: 10.100.0.0/16
    nodeCIDR: 172.19.0.0/29
    reservedSubnets: [10.250.0.0/16, 10.251.0.0/16]
    podsPerNode: 1
    nodes:
      - name: edge
        podSlice: 10.200.8.0/23
        pods: 3
      - name: n1
      - name: n2
        podSlice: 10.200.64.0/30
";

#[test]
fn explicit_node_list_with_custom_slices() {
    let t = Topology::from_yaml(CUSTOM).unwrap();
    assert_eq!(t.wan_cidr, net("192.0.2.0/28"));
    let milan = t.cluster("milan").unwrap();
    assert_eq!(milan.wan_addr, net("192.0.2.1/28"));
    assert_eq!(
        milan.reserved_subnets,
        [net("10.250.0.0/16"), net("10.251.0.0/16")]
    );

    let gw = milan.gateway();
    assert_eq!(gw.name, "edge");
    assert_eq!(gw.pod_slice, net("10.200.8.0/23"));
    assert_eq!(gw.bridge_addr, net("10.200.8.1/23"));
    assert_eq!(gw.pods.len(), 3);
    assert_eq!(gw.pods[2].addr, net("10.200.8.4/23"));
    assert_eq!(gw.pods[2].name, "edge-p2");

    // n1 has no podSlice: it is node 1, so it gets the second /24; podsPerNode applies.
    let n1 = milan.node("n1").unwrap();
    assert_eq!(n1.pod_slice, net("10.200.1.0/24"));
    assert_eq!(n1.lan_addr, net("172.19.0.2/29"));
    assert_eq!(n1.pods.len(), 1);

    let n2 = milan.node("n2").unwrap();
    assert_eq!(n2.bridge_addr, net("10.200.64.1/30"));
    assert_eq!(n2.pods[0].addr, net("10.200.64.2/30"));
    assert_eq!(n2.lan_addr, net("172.19.0.3/29"));
}

#[test]
fn to_yaml_round_trips() {
    let mut all: Vec<Topology> = Topology::preset_names()
        .iter()
        .map(|n| Topology::preset(n).unwrap())
        .collect();
    all.push(Topology::from_yaml(CUSTOM).unwrap());
    for t in all {
        let text = t.to_yaml();
        assert_eq!(Topology::from_yaml(&text), Ok(t), "{text}");
    }
}

#[test]
fn to_yaml_quotes_names_that_yaml_would_read_as_other_types() {
    let t = Topology::from_yaml("clusters: [{name: \"null\", podCIDR: 10.0.0.0/16, nodes: 1}]")
        .unwrap();
    assert_eq!(t.clusters[0].name, "null");
    assert!(t.to_yaml().contains("name: \"null\""));
    assert_eq!(Topology::from_yaml(&t.to_yaml()), Ok(t));
}

#[test]
fn plan_round_trips_through_json() {
    let t = Topology::from_yaml(CUSTOM).unwrap();
    let json = serde_json::to_string(&t).unwrap();
    assert!(json.contains("\"wan_cidr\":\"192.0.2.0/28\""), "{json}");
    let back: Topology = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
}

#[test]
fn json_plan_with_a_bad_name_is_rejected() {
    let t = Topology::preset("one-cluster").unwrap();
    let json = serde_json::to_string(&t)
        .unwrap()
        .replace("\"rome\"", "\"Rome\"");
    let err = serde_json::from_str::<Topology>(&json).unwrap_err();
    assert!(
        err.to_string().contains("\"Rome\" is not a valid name"),
        "{err}"
    );
}

#[test]
fn unknown_cluster_key_is_rejected_naming_the_key() {
    let err = Topology::from_yaml(
        "clusters:\n  - name: rome\n    podCidr: 10.200.0.0/16\n    nodes: 1\n",
    )
    .unwrap_err();
    assert_eq!(err.field, "<file>");
    assert!(err.problem.contains("unknown field `podCidr`"), "{err}");
    assert!(err.problem.contains("line 3"), "{err}");
}

#[test]
fn unknown_node_key_is_rejected_naming_the_key() {
    let yaml = "clusters:\n  - name: rome\n    podCIDR: 10.200.0.0/16\n    nodes:\n      - name: n0\n        slice: 10.200.0.0/24\n";
    let err = Topology::from_yaml(yaml).unwrap_err();
    assert_eq!(err.field, "<file>");
    assert!(err.problem.contains("unknown field `slice`"), "{err}");
}

#[test]
fn unknown_top_level_key_is_rejected_naming_the_key() {
    let err = Topology::from_yaml("wan: {cidr: 198.18.0.0/24}\nclustrs: []\n").unwrap_err();
    assert_eq!(err.field, "<file>");
    assert!(err.problem.contains("unknown field `clustrs`"), "{err}");
}

#[test]
fn yaml_syntax_error_maps_to_file() {
    let err = Topology::from_yaml("clusters:\n  - name: rome\n    podCIDR: [\n").unwrap_err();
    assert_eq!(err.field, "<file>");
    assert!(err.problem.contains("line 3"), "{err}");
    assert!(!err.problem.contains('\n'), "single line: {err}");
}

#[test]
fn nodes_of_the_wrong_shape_are_rejected() {
    let err = Topology::from_yaml("clusters: [{name: rome, podCIDR: 10.0.0.0/16, nodes: many}]")
        .unwrap_err();
    assert_eq!(err.field, "<file>");
    assert!(
        err.problem.contains("a node count or a list of nodes"),
        "{err}"
    );
}

#[test]
fn error_display_is_field_colon_problem() {
    let err = liqo_types::field::bad("clusters[0].podCIDR", "bad");
    assert_eq!(err.to_string(), "clusters[0].podCIDR: bad");
}

#[test]
fn names_are_validated() {
    for good in ["rome", "n0", "a", "abcdefghijkl"] {
        let name: Name = good.parse().unwrap();
        assert_eq!(name.to_string(), good);
        assert_eq!(name.as_ref(), good);
    }
    for (bad, reason) in [
        ("", "empty"),
        ("abcdefghijklm", "longer than 12"),
        ("0rome", "start with a letter"),
        ("Rome", "start with a letter"),
        ("ro-me", "no dashes"),
        ("romE", "only letters"),
    ] {
        let err = bad.parse::<Name>().unwrap_err();
        assert!(err.reason.contains(reason), "{bad:?}: {err}");
        assert_eq!(err.name, bad);
    }
}

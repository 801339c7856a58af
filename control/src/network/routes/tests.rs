use super::*;
use crate::{
    network::fixtures::{spec, tep},
    network::tunnel::{peerings, read},
};

fn node(name: &str, ip: Option<&str>, pod: Option<&str>, virt: bool) -> Node {
    let mut labels = serde_json::json!({});
    if virt {
        labels[labels::NODE_TYPE] = values::VIRTUAL_NODE.into();
    }
    let addresses: Vec<serde_json::Value> = ip
        .into_iter()
        .map(|a| serde_json::json!({"type": "InternalIP", "address": a}))
        .chain([serde_json::json!({"type": "Hostname", "address": name})])
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"podCIDR": pod},
        "status": {"addresses": addresses},
    }))
    .unwrap()
}

fn nodes() -> Vec<Node> {
    vec![
        node("n1", Some("172.18.0.2"), Some("10.200.1.0/24"), false),
        node("n0", Some("172.18.0.1"), Some("10.200.0.0/24"), false),
        node("liqo-milan", Some("172.18.0.9"), Some("10.9.0.0/24"), true),
        node("fresh", Some("172.18.0.3"), None, false),
        node("v6", Some("fd00::1"), Some("10.200.3.0/24"), false),
        node("bad", Some("172.18.0.4"), Some("fd00::/64"), false),
    ]
}

fn base() -> File {
    File::parse("node: \"\"\ngateway: \"\"\nunderlayInterface: eth0\n").unwrap()
}

#[test]
fn nodes_need_an_internal_ip_and_a_pod_cidr_and_virtual_nodes_are_not_in_the_overlay() {
    let (got, skipped) = overlay_nodes(&nodes());
    let names: Vec<&str> = got.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n0", "n1"]);
    assert_eq!(got[0].address.to_string(), "172.18.0.1");
    assert_eq!(got[0].pod_cidr.to_string(), "10.200.0.0/24");
    assert_eq!(skipped["liqo-milan"].to_string(), "a virtual node");
    assert_eq!(skipped["fresh"].to_string(), "no spec.podCIDR yet");
    assert_eq!(skipped["v6"].to_string(), "no IPv4 InternalIP");
    assert!(
        skipped["bad"].to_string().contains("no IPv4 pod CIDR"),
        "{}",
        skipped["bad"]
    );
    let lease: Lease =
        serde_json::from_value(serde_json::json!({"spec": {"holderIdentity": "n1"}})).unwrap();
    assert_eq!(lease_holder(&lease).as_deref(), Some("n1"));
    assert_eq!(lease_holder(&Lease::default()), None);
}

#[test]
fn the_file_is_the_base_with_the_cores_plan_for_this_node() {
    let teps = vec![
        read(&tep("t1", "milan", spec("milan", 71))),
        read(&tep("t2", "turin", spec("turin", 73))),
    ];
    let (p, _) = peerings(&teps, |_, _| None);
    let (ns, _) = overlay_nodes(&nodes());
    let rome: ClusterId = "rome".parse().unwrap();
    let r = render(&base(), &rome, "n1", &ns, "n0", &p).unwrap();
    let want = &plan::overlay(&rome, &ns, "n0", &p).unwrap().per_node()[1];
    assert_eq!(r.file.node, want.node);
    assert_eq!(r.file.gateway, "n0");
    assert_eq!(r.file.nodes, want.nodes);
    assert_eq!(r.file.remote_cidrs, want.remote_cidrs);
    assert_eq!(r.file.remote_cidrs.len(), 4);
    assert_eq!(
        r.file.underlay_interface.as_deref(),
        Some("eth0"),
        "base settings kept"
    );
    assert_eq!(File::parse(&r.text).unwrap(), r.file);
    assert!(r.refused.is_empty());
    let e = render(&base(), &rome, "fresh", &ns, "n0", &p).unwrap_err();
    assert!(
        e.to_string().contains("node fresh is not in the overlay"),
        "{e}"
    );
    let e = render(&base(), &rome, "n1", &ns, "n7", &p).unwrap_err();
    assert!(
        liqo_types::chain(&e).contains("no such node rome/n7"),
        "{}",
        liqo_types::chain(&e)
    );
}

#[test]
fn a_peer_whose_ranges_overlap_a_nodes_pods_is_left_out_and_the_others_stay() {
    let mut s = spec("turin", 73);
    s["remoteNATPodCIDR"] = "10.200.0.0/23".into();
    let teps = vec![
        read(&tep("t1", "milan", spec("milan", 71))),
        read(&tep("t2", "turin", s)),
    ];
    let (p, _) = peerings(&teps, |_, _| None);
    let (ns, _) = overlay_nodes(&nodes());
    let rome: ClusterId = "rome".parse().unwrap();
    let r = render(&base(), &rome, "n0", &ns, "n0", &p).unwrap();
    let ranges: Vec<String> = r
        .file
        .remote_cidrs
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ranges, ["10.71.0.0/16", "10.171.0.0/16"]);
    let e = &r.refused[&"turin".parse().unwrap()];
    assert!(e.problem.contains("10.200.0.0/23"), "{e}");
}

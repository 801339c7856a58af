//! The virtual node forge: the whole object (snapshot), base labels winning, rejected labels.

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;

fn milan() -> ClusterIdentity {
    serde_json::from_value(json!({
        "clusterID": "4858caa2-7848-4aab-a6b4-6984389bac56",
        "clusterName": "milan",
    }))
    .unwrap()
}

fn map<V: Clone>(pairs: &[(&str, V)]) -> BTreeMap<String, V> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn quota() -> BTreeMap<String, Quantity> {
    map(&[
        ("cpu", Quantity("4800m".into())),
        ("memory", Quantity("9600M".into())),
        ("pods", Quantity("99".into())),
    ])
}

fn at(rfc3339: &str) -> Time {
    Time(rfc3339.parse::<Timestamp>().unwrap())
}

#[test]
fn the_whole_node() {
    let remote = milan();
    let offer = map(&[
        ("topology.liqo.io/region", "center".to_owned()),
        ("liqo.io/type", "real-node".to_owned()),
        ("kubernetes.io/hostname", "milan-extra".to_owned()),
        ("bad key", "x".to_owned()),
        ("tier", "-gold".to_owned()),
    ]);
    let capacity = quota();
    let input = NodeInput {
        remote: &remote,
        offer_labels: &offer,
        capacity: &capacity,
        storage: false,
        kubelet_version: "v1.36.0",
        address: Some("127.0.0.1"),
        port: 10250,
    };
    let mut node = virtual_node(&input);
    node.status = Some(virtual_node_status(&input, &at("2026-11-23T11:00:00Z")));
    insta::assert_json_snapshot!(node);

    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(node.metadata.name.as_deref(), Some("liqo-milan"));
    assert_eq!(labels["liqo.io/type"], "virtual-node", "base labels win");
    assert_eq!(labels["kubernetes.io/hostname"], "liqo-milan");
    assert_eq!(labels["topology.liqo.io/region"], "center");
    assert_eq!(labels["storage.liqo.io/available"], "false");
    assert!(!labels.contains_key("bad key") && !labels.contains_key("tier"));

    let rejected: Vec<String> = rejected_offer_labels(&input)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        rejected,
        [
            "offer label bad key=\"x\" left off the virtual node: the key is not a qualified \
             name: its name has a character other than A-Z, a-z, 0-9, '-', '_', '.'",
            "offer label kubernetes.io/hostname=\"milan-extra\" left off the virtual node: the \
             node sets kubernetes.io/hostname=liqo-milan itself",
            "offer label liqo.io/type=\"real-node\" left off the virtual node: the node sets \
             liqo.io/type=virtual-node itself",
            "offer label tier=\"-gold\" left off the virtual node: the value is not a label \
             value: it does not start and end with an alphanumeric character",
        ]
    );
}

#[test]
fn capacity_is_allocatable_is_the_offer_and_conditions_are_unknown() {
    let remote = milan();
    let (offer, capacity) = (BTreeMap::new(), quota());
    let input = NodeInput {
        remote: &remote,
        offer_labels: &offer,
        capacity: &capacity,
        storage: true,
        kubelet_version: "v1.36.0",
        address: None,
        port: 10250,
    };
    let now = at("2026-11-23T11:00:00Z");
    let status = virtual_node_status(&input, &now);
    assert_eq!(status.capacity.as_ref(), Some(&capacity));
    assert_eq!(status.allocatable.as_ref(), Some(&capacity));
    assert_eq!(status.addresses, None);
    let conditions = status.conditions.unwrap();
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, CONDITION_TYPES);
    assert!(conditions.iter().all(|c| c.status == "Unknown"));
    assert!(rejected_offer_labels(&input).is_empty());
    let node = virtual_node(&input);
    assert_eq!(
        node.metadata.labels.unwrap()["storage.liqo.io/available"],
        "true"
    );
    // The same inputs give the same objects (a re-apply changes nothing).
    assert_eq!(
        virtual_node_status(&input, &now),
        virtual_node_status(&input, &now)
    );
    let taints = node.spec.unwrap().taints.unwrap();
    assert_eq!(
        serde_json::to_value(taints).unwrap(),
        json!([{"key": "virtual-node.liqo.io/not-allowed", "value": "true", "effect": "NoExecute"}])
    );
}

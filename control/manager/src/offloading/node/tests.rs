//! The launcher's pure parts: the status, the Lease, which Node it may claim, when a Lease
//! task restarts.

use super::*;

#[test]
fn ready_status_is_ready_with_resources_and_not_ready_under_pressure_without() {
    let remote = control::api::discovery::ClusterIdentity {
        cluster_id: "5c6a3e4f-1111-4c2d-9a9b-000000000001".parse().unwrap(),
        cluster_name: "milan".parse().unwrap(),
    };
    let capacity = [(
        "cpu".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
    )]
    .into_iter()
    .collect();
    let labels = Default::default();
    let i = NodeInput {
        remote: &remote,
        offer_labels: &labels,
        capacity: &capacity,
        storage: false,
        kubelet_version: "v1.30.0",
        address: None,
        port: KUBELET_PORT,
    };
    let s = ready_status(&i, &now());
    assert_eq!(s.capacity.as_ref(), Some(&capacity));
    assert_eq!(s.allocatable.as_ref(), Some(&capacity));
    let conds = s.conditions.unwrap();
    let got: Vec<_> = conds
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("Ready", "True", "KubeletReady"),
            (
                "MemoryPressure",
                "False",
                "RemoteClusterHasNoMemoryPressure"
            ),
            ("DiskPressure", "False", "RemoteClusterHasNoDiskPressure"),
            ("PIDPressure", "False", "RemoteClusterHasNoPIDPressure"),
        ]
    );
    let zero = [(
        "cpu".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("0m".into()),
    )]
    .into_iter()
    .collect();
    let empty = ready_status(
        &NodeInput {
            capacity: &zero,
            ..i
        },
        &now(),
    );
    let conds = empty.conditions.unwrap();
    assert_eq!(
        (conds[0].status.as_str(), conds[0].reason.as_deref()),
        ("False", Some("KubeletNotReady"))
    );
    assert!(conds[1..].iter().all(|c| c.status == "True"), "{conds:?}");
    let none = Default::default();
    let empty = ready_status(
        &NodeInput {
            capacity: &none,
            ..i
        },
        &now(),
    );
    assert_eq!(empty.conditions.unwrap()[0].status, "False");
    let l = lease("liqo-milan", "u", MicroTime(now().0));
    assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(l["spec"]["holderIdentity"], "liqo-milan");
    assert_eq!(l["metadata"]["ownerReferences"][0]["uid"], "u");
}

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    n
}

#[test]
fn only_an_absent_node_or_this_peers_virtual_node_is_claimed() {
    use control::consts::{labels::*, values::VIRTUAL_NODE};
    let me = "5c6a3e4f-1111-4c2d-9a9b-000000000001";
    let other = "5c6a3e4f-1111-4c2d-9a9b-000000000002";
    assert_eq!(claim(None, me), Ok(()));
    let mine = node(
        "liqo-milan",
        &[(NODE_TYPE, VIRTUAL_NODE), (REMOTE_CLUSTER_ID, me)],
    );
    assert_eq!(claim(Some(&mine), me), Ok(()));
    let theirs = node(
        "liqo-milan",
        &[(NODE_TYPE, VIRTUAL_NODE), (REMOTE_CLUSTER_ID, other)],
    );
    let e = claim(Some(&theirs), me).unwrap_err();
    assert!(e.contains("liqo-milan") && e.contains(other), "{e}");
    let real = node("liqo-milan", &[(REMOTE_CLUSTER_ID, me)]);
    let e = claim(Some(&real), me).unwrap_err();
    assert!(e.contains("not a virtual node"), "{e}");
    let unlabelled = node("liqo-milan", &[(NODE_TYPE, VIRTUAL_NODE)]);
    assert!(claim(Some(&unlabelled), me).is_err());
}

#[test]
fn a_lease_task_is_restarted_when_the_node_is_recreated_or_it_ended() {
    assert!(needs_task(None, "u1"));
    assert!(!needs_task(Some(("u1", false)), "u1"));
    assert!(needs_task(Some(("u1", true)), "u1"));
    assert!(needs_task(Some(("u0", false)), "u1"));
}

//! The node loop's pure decisions: which Node is claimed, what is written given what is
//! observed (node, status, heartbeat, reachability), the Lease, the ping transitions.

use std::collections::BTreeMap;

use crate::{
    api::{discovery::ClusterIdentity, sharing::ResourceOffer},
    consts::{labels::*, values::VIRTUAL_NODE, virtual_node::NOT_ALLOWED_TAINT},
};
use k8s_openapi::{
    api::core::v1::{Node, Taint},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
    jiff::{SignedDuration, Timestamp},
};

use super::*;

const ME: &str = "5c6a3e4f-1111-4c2d-9a9b-000000000001";
const OTHER: &str = "5c6a3e4f-1111-4c2d-9a9b-000000000002";

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.uid = Some("uid-1".into());
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    n
}

fn params() -> Params {
    Params {
        foreign: ClusterIdentity {
            cluster_id: ME.parse().unwrap(),
            cluster_name: "milan".parse().unwrap(),
        },
        node_ip: "127.0.0.1".into(),
        port: 10250,
        kubelet_version: "v1.36.0".into(),
        extra_labels: [("extra".to_owned(), "yes".to_owned())].into(),
    }
}

fn offer(cpu: &str, labels: &[(&str, &str)]) -> ResourceOffer {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "sharing.liqo.io/v1alpha1", "kind": "ResourceOffer",
        "metadata": {"name": "milan", "namespace": "liqo-tenant-milan"},
        "spec": {
            "clusterId": ME,
            "resourceQuota": {"hard": {"cpu": cpu, "memory": if cpu == "0" { "0" } else { "1Gi" }}},
            "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        },
    }))
    .unwrap()
}

fn at(secs: i64) -> Time {
    Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(1_800_000_000 + secs))
}

fn observed<'a>(
    node: Option<&'a Node>,
    offer: Option<&'a ResourceOffer>,
    now: &'a Time,
) -> Observed<'a> {
    Observed {
        node,
        offer,
        network_up: None,
        reachable: true,
        last_applied: None,
        now,
    }
}

/// The node after a plan was written (as the API server would hold it).
fn written(plan: &Plan, before: Option<&Node>) -> Node {
    let mut n = plan.node.clone().or_else(|| before.cloned()).unwrap();
    n.metadata.uid = Some("uid-1".into());
    if let Some(s) = &plan.status {
        n.status = Some(s.clone());
    } else {
        n.status = before.and_then(|b| b.status.clone());
    }
    n
}

fn conditions(n: &Node) -> Vec<(String, String, String)> {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason.unwrap_or_default()))
        .collect()
}

#[test]
fn only_an_absent_node_or_this_peers_virtual_node_is_claimed() {
    assert_eq!(claim(None, ME), Ok(()));
    let mine = node(
        "liqo-milan",
        &[(NODE_TYPE, VIRTUAL_NODE), (REMOTE_CLUSTER_ID, ME)],
    );
    assert_eq!(claim(Some(&mine), ME), Ok(()));
    let theirs = node(
        "liqo-milan",
        &[(NODE_TYPE, VIRTUAL_NODE), (REMOTE_CLUSTER_ID, OTHER)],
    );
    let e = claim(Some(&theirs), ME).unwrap_err().to_string();
    assert!(e.contains("liqo-milan") && e.contains(OTHER), "{e}");
    let real = node("liqo-milan", &[(REMOTE_CLUSTER_ID, ME)]);
    assert!(
        claim(Some(&real), ME)
            .unwrap_err()
            .to_string()
            .contains("not a virtual node")
    );
    let unlabelled = node("liqo-milan", &[(NODE_TYPE, VIRTUAL_NODE)]);
    assert!(claim(Some(&unlabelled), ME).is_err());
    // Nothing is written to a Node that is not ours.
    let now = at(0);
    let plan = decide(&params(), &observed(Some(&theirs), None, &now));
    assert!(plan.node.is_none() && plan.status.is_none(), "{plan:?}");
    assert!(plan.refused.unwrap().contains(OTHER));
}

#[test]
fn an_absent_node_is_applied_whole_with_capacity_address_port_and_ready() {
    let now = at(0);
    let o = offer(
        "4",
        &[("topology.liqo.io/region", "north"), (NODE_TYPE, "x")],
    );
    let plan = decide(&params(), &observed(None, Some(&o), &now));
    let n = plan.node.clone().expect("the node is applied");
    let labels = n.metadata.labels.clone().unwrap();
    assert_eq!(n.metadata.name.as_deref(), Some("liqo-milan"));
    assert_eq!(labels[NODE_TYPE], VIRTUAL_NODE);
    assert_eq!(labels[REMOTE_CLUSTER_ID], ME);
    assert_eq!(labels["topology.liqo.io/region"], "north");
    assert_eq!(labels["extra"], "yes");
    assert_eq!(plan.rejected.len(), 1, "{:?}", plan.rejected);
    let taints = n.spec.unwrap().taints.unwrap();
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (taints[0].key.as_str(), taints[0].effect.as_str()),
        (NOT_ALLOWED_TAINT, "NoExecute")
    );
    let s = plan.status.clone().expect("the status is written");
    let hard = o.spec.resource_quota.unwrap().hard.unwrap();
    assert_eq!(s.capacity.as_ref(), Some(&hard));
    assert_eq!(s.allocatable.as_ref(), Some(&hard));
    let addr = &s.addresses.clone().unwrap()[0];
    assert_eq!(
        (addr.type_.as_str(), addr.address.as_str()),
        ("InternalIP", "127.0.0.1")
    );
    assert_eq!(
        s.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port,
        10250
    );
    assert_eq!(s.node_info.unwrap().kubelet_version, "v1.36.0");
    let w = written(&plan, None);
    assert_eq!(
        conditions(&w)[0],
        ("Ready".into(), "True".into(), "KubeletReady".into())
    );
    // No NetworkUnavailable when the network is not Liqo's.
    assert!(conditions(&w).iter().all(|c| c.0 != "NetworkUnavailable"));
}

#[test]
fn nothing_is_written_again_until_something_changes_or_the_heartbeat_is_due() {
    let p = params();
    let o = offer("4", &[]);
    let t0 = at(0);
    let first = decide(&p, &observed(None, Some(&o), &t0));
    let n = written(&first, None);
    let applied = n.metadata.labels.clone().unwrap();
    let t1 = at(10);
    let again = Observed {
        last_applied: Some(&applied),
        ..observed(Some(&n), Some(&o), &t1)
    };
    let plan = decide(&p, &again);
    assert_eq!(
        (plan.node.is_some(), plan.status.is_some()),
        (false, false),
        "{plan:?}"
    );
    // The heartbeat is due after STATUS_REFRESH: the status alone, transition times kept.
    let t2 = at(STATUS_REFRESH.as_secs() as i64);
    let plan = decide(&p, &Observed { now: &t2, ..again });
    assert!(plan.node.is_none());
    let s = plan.status.expect("heartbeat");
    let ready = &s.conditions.unwrap()[0];
    assert_eq!(ready.last_heartbeat_time.as_ref(), Some(&t2));
    assert_eq!(ready.last_transition_time.as_ref(), Some(&t0));
    // A new offer: the status is written at once, Ready turned False (a new transition).
    let empty = offer("0", &[]);
    let plan = decide(
        &p,
        &Observed {
            offer: Some(&empty),
            ..again
        },
    );
    let w = written(&plan, Some(&n));
    assert_eq!(
        conditions(&w)[..2],
        [
            ("Ready".into(), "False".into(), "KubeletNotReady".into()),
            (
                "MemoryPressure".into(),
                "True".into(),
                "RemoteClusterHasMemoryPressure".into()
            )
        ]
    );
    let ready = &w.status.unwrap().conditions.unwrap()[0];
    assert_eq!(ready.last_transition_time.as_ref(), Some(&t1));
    // New offer labels: the node is applied again.
    let labelled = offer("4", &[("a", "b")]);
    let plan = decide(
        &p,
        &Observed {
            offer: Some(&labelled),
            ..again
        },
    );
    assert_eq!(plan.node.unwrap().metadata.labels.unwrap()["a"], "b");
}

#[test]
fn a_node_changed_by_someone_is_fixed_keeping_other_taints() {
    let p = params();
    let o = offer("4", &[]);
    let t0 = at(0);
    let mut n = written(&decide(&p, &observed(None, Some(&o), &t0)), None);
    let applied = n.metadata.labels.clone().unwrap();
    n.metadata.labels.as_mut().unwrap().remove("extra");
    n.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "node.kubernetes.io/unreachable".into(),
        effect: "NoExecute".into(),
        ..Taint::default()
    }]);
    let plan = decide(
        &p,
        &Observed {
            last_applied: Some(&applied),
            ..observed(Some(&n), Some(&o), &t0)
        },
    );
    let fixed = plan.node.expect("re-applied");
    assert_eq!(fixed.metadata.labels.unwrap()["extra"], "yes");
    let keys: Vec<_> = fixed
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, [NOT_ALLOWED_TAINT, "node.kubernetes.io/unreachable"]);
}

#[test]
fn no_status_is_written_while_the_provider_is_unreachable_and_ready_comes_back_after() {
    let p = params();
    let o = offer("4", &[]);
    let t0 = at(0);
    let before = written(&decide(&p, &observed(None, Some(&o), &t0)), None);
    let applied = before.metadata.labels.clone().unwrap();
    let t1 = at(600);
    let down = Observed {
        reachable: false,
        last_applied: Some(&applied),
        ..observed(Some(&before), Some(&o), &t1)
    };
    assert!(decide(&p, &down).status.is_none());
    // kcm marked it Unknown meanwhile; the provider answers again: Ready True written.
    let mut n = before.clone();
    for c in n.status.as_mut().unwrap().conditions.as_mut().unwrap() {
        c.status = "Unknown".into();
    }
    let t2 = at(601);
    let up = Observed {
        reachable: true,
        now: &t2,
        node: Some(&n),
        ..down
    };
    let w = written(&decide(&p, &up), Some(&n));
    assert_eq!(conditions(&w)[0].1, "True");
    assert_eq!(
        w.status.unwrap().conditions.unwrap()[0]
            .last_transition_time
            .as_ref(),
        Some(&t2)
    );
}

#[test]
fn the_network_condition_follows_the_tunnel_when_the_network_is_liqos() {
    let p = params();
    let o = offer("4", &[]);
    let t0 = at(0);
    for (up, ready, net, reason) in [
        (true, "True", "False", "LiqoNetworkingUp"),
        (false, "False", "True", "LiqoNetworkingDown"),
    ] {
        let plan = decide(
            &p,
            &Observed {
                network_up: Some(up),
                ..observed(None, Some(&o), &t0)
            },
        );
        let c = conditions(&written(&plan, None));
        assert_eq!(c[0].1, ready);
        let n = c.iter().find(|c| c.0 == "NetworkUnavailable").unwrap();
        assert_eq!((n.1.as_str(), n.2.as_str()), (net, reason));
    }
}

#[test]
fn a_ping_transition_is_reported_once() {
    let mut r = Reach::default();
    assert!(!r.reachable());
    assert_eq!(r.observe(true), Some(true));
    assert_eq!(r.observe(true), None);
    assert!(r.reachable());
    assert_eq!(r.observe(false), Some(false));
    assert_eq!(r.observe(false), None);
    assert!(!r.reachable());
    assert_eq!(r.observe(true), Some(true));
    let mut first_down = Reach::default();
    assert_eq!(first_down.observe(false), Some(false));
}

#[test]
fn the_lease_names_its_holder_duration_and_owner() {
    let l = lease(
        "liqo-milan",
        "u",
        std::time::Duration::from_secs(40),
        MicroTime(at(0).0),
    );
    assert_eq!(l["metadata"]["namespace"], LEASE_NAMESPACE);
    assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(l["spec"]["holderIdentity"], "liqo-milan");
    assert_eq!(l["metadata"]["ownerReferences"][0]["uid"], "u");
    assert_eq!(l["metadata"]["ownerReferences"][0]["kind"], "Node");
}

#[test]
fn the_advertised_kubelet_port_is_read_and_an_unset_one_is_none() {
    use k8s_openapi::api::core::v1::{DaemonEndpoint, NodeDaemonEndpoints, NodeStatus};
    let mut n = node("liqo-milan", &[]);
    assert_eq!(kubelet_port(&n), None);
    let with = |port: i32| NodeStatus {
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port }),
        }),
        ..Default::default()
    };
    n.status = Some(with(33345));
    assert_eq!(kubelet_port(&n), Some(33345));
    for bad in [0, -1, 70000] {
        n.status = Some(with(bad));
        assert_eq!(kubelet_port(&n), None, "{bad}");
    }
}

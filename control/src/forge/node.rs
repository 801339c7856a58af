//! The virtual node of a peering, built whole from its inputs (upstream Liqo v0.5.4
//! `liqoNodeProvider/setup.go`): [`virtual_node`] (name, labels, taint) and
//! [`virtual_node_status`] (capacity = allocatable = the ResourceOffer's quota, node info,
//! address, kubelet port, Unknown conditions).
//!
//! Unlike upstream (`labels.Merge(base, extra)`), the base labels win over the provider's
//! offer labels: a provider cannot relabel the node's identity (`liqo.io/type`,
//! `liqo.io/remote-cluster-id`, `kubernetes.io/hostname`, ...). Offer labels that collide or
//! are not valid labels are left out and reported by [`rejected_offer_labels`].
//!
//! It never applies the node, renews a lease or computes readiness: the controller-manager
//! (and later the virtual kubelet) does, with these objects.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::{
    api::core::v1::{
        DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec,
        NodeStatus, NodeSystemInfo, Taint,
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, Time},
    },
};

use crate::{
    api::discovery::ClusterIdentity,
    consts::{labels, values, virtual_node as vn},
    names::{self, ObjectName},
    selector::{label_key_problem, label_value_problem},
};

#[cfg(test)]
mod tests;

/// The node condition types, all Unknown until the node's owner reports them (upstream
/// `UnknownNodeConditions`, same order).
pub const CONDITION_TYPES: [&str; 5] = [
    "Ready",
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// The node's `status.declaredFeatures` (Kubernetes 1.36 NodeDeclaredFeatures; not in
/// `k8s-openapi`'s `NodeStatus` yet, so written next to it): `ExtendWebSocketsToKubelet`
/// makes the API server proxy `pods/exec|attach` to the virtual kubelet over WebSocket
/// (`v5.channel.k8s.io`) instead of SPDY.
pub const DECLARED_FEATURES: [&str; 1] = ["ExtendWebSocketsToKubelet"];

/// The reasons of the reported conditions (upstream Liqo's virtual kubelet, control-plane.md
/// §2.2), shared by whoever reports them (the controller-manager's node launcher, the virtual
/// kubelet).
pub mod reasons {
    /// Ready True: the offer has resources (and the network is not down).
    pub const KUBELET_READY: &str = "KubeletReady";
    /// Ready False: the offer's quota is empty or all zero (or the network is down).
    pub const KUBELET_NOT_READY: &str = "KubeletNotReady";
    /// MemoryPressure False.
    pub const NO_MEMORY_PRESSURE: &str = "RemoteClusterHasNoMemoryPressure";
    /// MemoryPressure True (no resources offered).
    pub const MEMORY_PRESSURE: &str = "RemoteClusterHasMemoryPressure";
    /// DiskPressure False.
    pub const NO_DISK_PRESSURE: &str = "RemoteClusterHasNoDiskPressure";
    /// DiskPressure True (no resources offered).
    pub const DISK_PRESSURE: &str = "RemoteClusterHasDiskPressure";
    /// PIDPressure False.
    pub const NO_PID_PRESSURE: &str = "RemoteClusterHasNoPIDPressure";
    /// PIDPressure True (no resources offered).
    pub const PID_PRESSURE: &str = "RemoteClusterHasPIDPressure";
    /// NetworkUnavailable False: the peer's TunnelEndpoint is connected.
    pub const NETWORKING_UP: &str = "LiqoNetworkingUp";
    /// NetworkUnavailable True: the peer's TunnelEndpoint is not connected.
    pub const NETWORKING_DOWN: &str = "LiqoNetworkingDown";
}

/// Whether an offer's quota has resources: some quantity whose number is not zero (an empty
/// or all-zero quota is not).
pub fn has_resources(quota: &BTreeMap<String, Quantity>) -> bool {
    quota.values().any(|q| {
        let number: String =
            q.0.trim_start_matches(['+', '-'])
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
        number.chars().any(|c| ('1'..='9').contains(&c))
    })
}

/// The conditions a virtual node's owner reports since `since`: the pressures True exactly
/// when the offer has no resources ([`has_resources`]); NetworkUnavailable only when the
/// network is known (`network_up`), from the peer's TunnelEndpoint; Ready True when there are
/// resources and the network is not known down.
pub fn reported_conditions(
    resources: bool,
    network_up: Option<bool>,
    since: &Time,
) -> Vec<NodeCondition> {
    let cond = |type_: &str, status: bool, reason: &str, message: &str| NodeCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        last_heartbeat_time: Some(since.clone()),
        last_transition_time: Some(since.clone()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    };
    let ready = resources && network_up != Some(false);
    let pressure = !resources;
    let mut out = vec![if ready {
        cond(
            "Ready",
            true,
            reasons::KUBELET_READY,
            "The Liqo virtual node is ready",
        )
    } else if !resources {
        cond(
            "Ready",
            false,
            reasons::KUBELET_NOT_READY,
            "The remote cluster offers no resources",
        )
    } else {
        cond(
            "Ready",
            false,
            reasons::KUBELET_NOT_READY,
            "The network to the remote cluster is down",
        )
    }];
    for (type_, yes, no) in [
        (
            "MemoryPressure",
            reasons::MEMORY_PRESSURE,
            reasons::NO_MEMORY_PRESSURE,
        ),
        (
            "DiskPressure",
            reasons::DISK_PRESSURE,
            reasons::NO_DISK_PRESSURE,
        ),
        (
            "PIDPressure",
            reasons::PID_PRESSURE,
            reasons::NO_PID_PRESSURE,
        ),
    ] {
        out.push(if pressure {
            cond(type_, true, yes, "The remote cluster offers no resources")
        } else {
            cond(type_, false, no, "The remote cluster offers resources")
        });
    }
    if let Some(up) = network_up {
        out.push(if up {
            cond(
                "NetworkUnavailable",
                false,
                reasons::NETWORKING_UP,
                "The network to the remote cluster is up",
            )
        } else {
            cond(
                "NetworkUnavailable",
                true,
                reasons::NETWORKING_DOWN,
                "The network to the remote cluster is down",
            )
        });
    }
    out
}

/// What the virtual node of one provider is made of.
#[derive(Debug, Clone, Copy)]
pub struct NodeInput<'a> {
    /// The provider (the node is `liqo-<its cluster name>`).
    pub remote: &'a ClusterIdentity,
    /// The ResourceOffer's `spec.labels` (the provider's `--cluster-labels`).
    pub offer_labels: &'a BTreeMap<String, String>,
    /// The ResourceOffer's `spec.resourceQuota.hard`.
    pub capacity: &'a BTreeMap<String, Quantity>,
    /// Whether the provider offers storage (`storage.liqo.io/available`).
    pub storage: bool,
    /// The home apiserver's version (`nodeInfo.kubeletVersion`).
    pub kubelet_version: &'a str,
    /// The node's InternalIP (the virtual kubelet's address), if known.
    pub address: Option<&'a str>,
    /// The virtual kubelet's port (`daemonEndpoints.kubeletEndpoint.port`).
    pub port: u16,
}

/// The node's name: `liqo-<remote cluster name>`.
pub fn node_name(i: &NodeInput<'_>) -> ObjectName {
    names::virtual_node(&i.remote.cluster_name)
}

fn base_labels(i: &NodeInput<'_>) -> BTreeMap<String, String> {
    let name = node_name(i);
    [
        (vn::HOSTNAME, name.as_str()),
        (vn::ROLE, vn::ROLE_AGENT),
        (vn::OS, vn::OS_LINUX),
        (vn::ARCH, vn::ARCH_AMD64),
        (labels::NODE_TYPE, values::VIRTUAL_NODE),
        (labels::REMOTE_CLUSTER_ID, i.remote.cluster_id.as_str()),
        (vn::EXCLUDE_FROM_EXTERNAL_LB, values::TRUE),
        (vn::EXCLUDE_BALANCER_ALPHA, values::TRUE),
        (
            vn::STORAGE_AVAILABLE,
            if i.storage {
                values::TRUE
            } else {
                values::FALSE
            },
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// An offer label left off the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedLabel {
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Why (names the bad part).
    pub problem: String,
}

impl fmt::Display for RejectedLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offer label {}={:?} left off the virtual node: {}",
            self.key, self.value, self.problem
        )
    }
}

/// The offer labels left off the node, in key order: keys the node sets itself, and keys or
/// values Kubernetes would refuse (the apply would fail as a whole). Each deserves an Event.
pub fn rejected_offer_labels(i: &NodeInput<'_>) -> Vec<RejectedLabel> {
    let base = base_labels(i);
    i.offer_labels
        .iter()
        .filter_map(|(k, v)| {
            let problem = if let Some(own) = base.get(k) {
                format!("the node sets {k}={own} itself")
            } else if let Err(p) = label_key_problem(k) {
                format!("the key {p}")
            } else if let Err(p) = label_value_problem(v) {
                format!("the value {p}")
            } else {
                return None;
            };
            Some(RejectedLabel {
                key: k.clone(),
                value: v.clone(),
                problem,
            })
        })
        .collect()
}

/// The node's metadata and spec: name, labels (base labels, then the valid offer labels
/// that do not collide) and the taint `virtual-node.liqo.io/not-allowed=true:NoExecute`. No
/// status, finalizers or owner: those are written separately.
pub fn virtual_node(i: &NodeInput<'_>) -> Node {
    let rejected = rejected_offer_labels(i);
    let mut node_labels = base_labels(i);
    for (k, v) in i.offer_labels {
        if !rejected.iter().any(|r| &r.key == k) {
            node_labels.insert(k.clone(), v.clone());
        }
    }
    Node {
        metadata: ObjectMeta {
            name: Some(node_name(i).into()),
            labels: Some(node_labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: vn::NOT_ALLOWED_TAINT.to_owned(),
                value: Some(values::TRUE.to_owned()),
                effect: "NoExecute".to_owned(),
                time_added: None,
            }]),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

/// The node's status as first written: capacity = allocatable = the offer; node info
/// (kubelet version, `amd64`, `Linux`); the InternalIP and kubelet port; every condition
/// of [`CONDITION_TYPES`] Unknown since `now`. Pass the same `now` on later applies (the
/// node's creation time, say) so a re-apply changes nothing.
pub fn virtual_node_status(i: &NodeInput<'_>, now: &Time) -> NodeStatus {
    NodeStatus {
        capacity: Some(i.capacity.clone()),
        allocatable: Some(i.capacity.clone()),
        node_info: Some(NodeSystemInfo {
            kubelet_version: i.kubelet_version.to_owned(),
            architecture: vn::ARCH_AMD64.to_owned(),
            operating_system: vn::OPERATING_SYSTEM.to_owned(),
            ..NodeSystemInfo::default()
        }),
        addresses: i.address.map(|a| {
            vec![NodeAddress {
                type_: "InternalIP".to_owned(),
                address: a.to_owned(),
            }]
        }),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(i.port),
            }),
        }),
        conditions: Some(
            CONDITION_TYPES
                .iter()
                .map(|t| NodeCondition {
                    type_: (*t).to_owned(),
                    status: "Unknown".to_owned(),
                    last_heartbeat_time: Some(now.clone()),
                    last_transition_time: Some(now.clone()),
                    reason: None,
                    message: None,
                })
                .collect(),
        ),
        ..NodeStatus::default()
    }
}

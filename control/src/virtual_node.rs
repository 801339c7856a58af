//! The virtual kubelet's decisions about its virtual node: which Node may be written ([`claim`]),
//! what to write given what is observed ([`decide`]: the Node's labels and taints, its status),
//! when the provider's reachability changed ([`Reach`]), and the Lease ([`lease`]). No I/O; the
//! time is an input.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    api::{discovery::ClusterIdentity, sharing::ResourceOffer},
    consts::{labels, values, virtual_node as vn},
    forge::node::{
        NodeInput, RejectedLabel, has_resources, rejected_offer_labels, reported_conditions,
        virtual_node, virtual_node_status,
    },
};
use k8s_openapi::{
    api::core::v1::{Node, NodeCondition, NodeStatus},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
};
use kube::ResourceExt;
use serde_json::json;

/// The namespace of the nodes' Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// A status is written again once its Ready heartbeat is this old (with the 10 s tick: at
/// least every 60 s), even when nothing changed.
pub const STATUS_REFRESH: Duration = Duration::from_secs(50);

/// Why the Node named for a peer's virtual node is not that peer's to write or delete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Not a virtual node at all.
    #[error("Node {node} exists and is not a virtual node")]
    NotVirtual {
        /// The Node.
        node: String,
    },
    /// Another peer's virtual node.
    #[error("Node {node} is the virtual node of cluster {owner}")]
    OtherPeer {
        /// The Node.
        node: String,
        /// The peer it belongs to.
        owner: String,
    },
    /// A virtual node that names no peer.
    #[error("Node {node} is a virtual node without a {label} label", label = labels::REMOTE_CLUSTER_ID)]
    NoOwner {
        /// The Node.
        node: String,
    },
}

/// Whether the Node named for `peer`'s virtual node may be written or deleted by it: when
/// absent, or when it is a virtual node (`liqo.io/type=virtual-node`) of that peer
/// (`liqo.io/remote-cluster-id=<peer>`). Otherwise the error says whose Node it is.
pub fn claim(node: Option<&Node>, peer: &str) -> Result<(), ClaimError> {
    let Some(node) = node else { return Ok(()) };
    let node_labels = node.labels();
    if node_labels.get(labels::NODE_TYPE).map(String::as_str) != Some(values::VIRTUAL_NODE) {
        return Err(ClaimError::NotVirtual {
            node: node.name_any(),
        });
    }
    match node_labels.get(labels::REMOTE_CLUSTER_ID) {
        Some(owner) if owner == peer => Ok(()),
        Some(owner) => Err(ClaimError::OtherPeer {
            node: node.name_any(),
            owner: owner.clone(),
        }),
        None => Err(ClaimError::NoOwner {
            node: node.name_any(),
        }),
    }
}

/// What does not change during a run: the provider, the node's address and port, the
/// kubelet version (the home API server's), the extra labels.
#[derive(Debug, Clone)]
pub struct Params {
    /// The provider.
    pub foreign: ClusterIdentity,
    /// The InternalIP.
    pub node_ip: String,
    /// The kubelet endpoint's port.
    pub port: u16,
    /// `nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// `--node-extra-labels` (they win over the offer's labels; the node's own labels win
    /// over both).
    pub extra_labels: BTreeMap<String, String>,
}

/// What the node loop sees.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The Node of that name, if any.
    pub node: Option<&'a Node>,
    /// The accepted offer, if present.
    pub offer: Option<&'a ResourceOffer>,
    /// The network: `None` when it is not Liqo's, else whether the TunnelEndpoint is connected.
    pub network_up: Option<bool>,
    /// Whether the provider answered the last ping (no status is written while it does not:
    /// the status heartbeat would keep the node alive as much as the Lease).
    pub reachable: bool,
    /// The labels applied last by this run (`None` before its first apply).
    pub last_applied: Option<&'a BTreeMap<String, String>>,
    /// Now.
    pub now: &'a Time,
}

/// What to write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// The Node (metadata and spec) to apply.
    pub node: Option<Node>,
    /// The status to apply.
    pub status: Option<NodeStatus>,
    /// Why nothing may be written (the Node is not ours).
    pub refused: Option<String>,
    /// Labels of the offer or the extra labels left off the node.
    pub rejected: Vec<RejectedLabel>,
}

/// The offer's labels with the extra labels over them.
fn wanted_labels(p: &Params, offer: Option<&ResourceOffer>) -> BTreeMap<String, String> {
    let mut out = offer.map(|o| o.spec.labels.clone()).unwrap_or_default();
    out.extend(p.extra_labels.clone());
    out
}

/// What to write given what is observed: the Node when absent, its labels changed since the
/// last apply, or a label or our taint is missing (other taints, e.g. kcm's
/// `node.kubernetes.io/unreachable`, are kept in the list); its status when the provider is
/// reachable and the status differs (capacity, address, port, conditions) or its heartbeat is
/// [`STATUS_REFRESH`] old. A Node of that name that is not the provider's virtual node is never
/// written.
pub fn decide(p: &Params, o: &Observed<'_>) -> Plan {
    if let Err(why) = claim(o.node, p.foreign.cluster_id.as_str()) {
        return Plan {
            refused: Some(why.to_string()),
            ..Plan::default()
        };
    }
    let capacity = o
        .offer
        .and_then(|r| r.spec.resource_quota.as_ref())
        .and_then(|q| q.hard.clone())
        .unwrap_or_default();
    let offer_labels = wanted_labels(p, o.offer);
    let input = NodeInput {
        remote: &p.foreign,
        offer_labels: &offer_labels,
        capacity: &capacity,
        storage: o.offer.is_some_and(|r| !r.spec.storage_classes.is_empty()),
        kubelet_version: &p.kubelet_version,
        address: Some(&p.node_ip),
        port: p.port,
    };
    let mut desired = virtual_node(&input);
    let want_labels = desired.metadata.labels.clone().unwrap_or_default();
    let ours = desired
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let observed_taints = o
        .node
        .and_then(|n| n.spec.as_ref())
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let missing = match o.node {
        None => true,
        Some(n) => {
            let have = n.labels();
            want_labels.iter().any(|(k, v)| have.get(k) != Some(v))
                || ours.iter().any(|t| {
                    !observed_taints
                        .iter()
                        .any(|h| h.key == t.key && h.value == t.value && h.effect == t.effect)
                })
        }
    };
    let node = (missing || o.last_applied != Some(&want_labels)).then(|| {
        let mut taints = ours.clone();
        taints.extend(
            observed_taints
                .into_iter()
                .filter(|t| t.key != vn::NOT_ALLOWED_TAINT),
        );
        if let Some(spec) = desired.spec.as_mut() {
            spec.taints = Some(taints);
        }
        desired
    });
    let status = if o.reachable {
        let observed_status = o.node.and_then(|n| n.status.as_ref());
        let want = status(&input, o.network_up, observed_status, o.now);
        observed_status
            .is_none_or(|s| !same_status(s, &want) || heartbeat_due(s, o.now))
            .then_some(want)
    } else {
        None
    };
    Plan {
        node,
        status,
        refused: None,
        rejected: rejected_offer_labels(&input),
    }
}

/// The node's status: capacity = allocatable = the offer, node info, address, port, and the
/// reported conditions with heartbeat `now`; a condition whose status did not change keeps
/// its observed transition time.
pub fn status(
    i: &NodeInput<'_>,
    network_up: Option<bool>,
    observed: Option<&NodeStatus>,
    now: &Time,
) -> NodeStatus {
    let mut s = virtual_node_status(i, now);
    let mut conditions = reported_conditions(has_resources(i.capacity), network_up, now);
    let before = observed.and_then(|s| s.conditions.as_ref());
    for c in &mut conditions {
        if let Some(old) = before
            .into_iter()
            .flatten()
            .find(|b| b.type_ == c.type_ && b.status == c.status)
            && old.last_transition_time.is_some()
        {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
    s.conditions = Some(conditions);
    s
}

fn condition_key(c: &NodeCondition) -> (&str, &str, Option<&str>, Option<&str>) {
    (
        c.type_.as_str(),
        c.status.as_str(),
        c.reason.as_deref(),
        c.message.as_deref(),
    )
}

/// The kubelet port a Node advertises (`daemonEndpoints.kubeletEndpoint.port`), if set.
pub fn kubelet_port(node: &Node) -> Option<u16> {
    node.status.as_ref().and_then(status_port)
}

fn status_port(s: &NodeStatus) -> Option<u16> {
    s.daemon_endpoints
        .as_ref()
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .and_then(|k| u16::try_from(k.port).ok())
        .filter(|p| *p != 0)
}

/// Whether `observed` already says what `want` says (timestamps aside; conditions of other
/// types, written by others, ignored).
pub fn same_status(observed: &NodeStatus, want: &NodeStatus) -> bool {
    let info = |s: &NodeStatus| {
        s.node_info.as_ref().map(|n| {
            (
                n.kubelet_version.clone(),
                n.architecture.clone(),
                n.operating_system.clone(),
            )
        })
    };
    let have = observed.conditions.as_deref().unwrap_or_default();
    observed.capacity == want.capacity
        && observed.allocatable == want.allocatable
        && observed.addresses == want.addresses
        && status_port(observed) == status_port(want)
        && info(observed) == info(want)
        && want
            .conditions
            .iter()
            .flatten()
            .all(|w| have.iter().any(|h| condition_key(h) == condition_key(w)))
}

/// Whether the observed Ready heartbeat is [`STATUS_REFRESH`] old (or missing).
pub fn heartbeat_due(observed: &NodeStatus, now: &Time) -> bool {
    let beat = observed
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref());
    beat.is_none_or(|b| now.0.duration_since(b.0).as_secs_f64() >= STATUS_REFRESH.as_secs_f64())
}

/// The provider's reachability as the pings report it; [`Reach::observe`] says when it
/// changed, so a transition is logged once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// The last ping's outcome (`None` before the first).
    pub last: Option<bool>,
}

impl Reach {
    /// Records a ping; returns the new state when it changed (the first ping is a change).
    pub fn observe(&mut self, ok: bool) -> Option<bool> {
        let changed = self.last != Some(ok);
        self.last = Some(ok);
        changed.then_some(ok)
    }

    /// Whether the last ping succeeded (the Lease is renewed and the status written only then).
    pub fn reachable(&self) -> bool {
        self.last == Some(true)
    }
}

/// The node's Lease as applied: holder = the node, `duration`, renewed `at`, owned by the
/// Node of UID `uid`.
pub fn lease(node: &str, uid: &str, duration: Duration, at: MicroTime) -> serde_json::Value {
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX).max(1);
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": seconds, "renewTime": at},
    })
}

#[cfg(test)]
mod tests;

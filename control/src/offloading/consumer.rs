//! The consumer's NamespaceOffloading controller, decided ([`decide`]): the finalizer, the
//! namespace's `liqo.io/scheduling-enabled` label, the `desiredMapping` entry it asks of each
//! peer's NamespaceMap, Warning Events, and the status, last.
//!
//! Decisions are per peer (design 15 §3.1, §5.3): a peer whose virtual node is missing or
//! being deleted keeps its entry untouched, so a node that blinks never costs a remote
//! namespace; a bad selector or remote name changes no mapping. Selector semantics are
//! [`crate::selector`]'s. It never talks to the apiserver and never reads a clock (`now` is
//! an input).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::status::{self, ClusterState};
use crate::{
    api::{
        ClusterId,
        discovery::ClusterIdentity,
        offloading::{NamespaceOffloadingSpec, NamespaceOffloadingStatus, PodOffloadingStrategy},
        virtualkubelet::RemoteNamespaceStatus,
    },
    names::NamespaceName,
    selector,
};

#[cfg(test)]
mod tests;

/// Event reason: the DefaultName remote name is not a namespace name.
pub const INVALID_REMOTE_NAME: &str = "InvalidRemoteNamespaceName";
/// Event reason: the clusterSelector is invalid (upstream's reason).
pub const INVALID_SELECTOR: &str = "Invalid";

/// A peer's virtual node (`liqo.io/type=virtual-node`, `liqo.io/remote-cluster-id=<peer>`).
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// Its name (for `matchFields metadata.name`).
    pub name: &'a str,
    /// Its labels (what the selector matches).
    pub labels: &'a BTreeMap<String, String>,
    /// Whether it has a `deletionTimestamp`.
    pub deleting: bool,
}

/// One peer: its local NamespaceMap and its virtual node.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    /// The NamespaceMap's name (the peer's UniqueName): the status key.
    pub map: &'a str,
    /// The NamespaceMap's namespace (the peer's tenant namespace).
    pub map_namespace: &'a str,
    /// The peer's cluster ID.
    pub cluster_id: &'a ClusterId,
    /// The peer's virtual node, if it exists.
    pub node: Option<NodeView<'a>>,
    /// This namespace's `desiredMapping` entry in the map.
    pub desired: Option<&'a str>,
    /// This namespace's `currentMapping` entry in the map.
    pub current: Option<&'a RemoteNamespaceStatus>,
}

/// What the controller observed for one NamespaceOffloading.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// The NamespaceOffloading's namespace.
    pub namespace: &'a NamespaceName,
    /// Its spec.
    pub spec: &'a NamespaceOffloadingSpec,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// Whether it has a `deletionTimestamp`.
    pub deleting: bool,
    /// Whether it carries the NamespaceOffloading controller's finalizer.
    pub has_finalizer: bool,
    /// Its current status.
    pub status: &'a NamespaceOffloadingStatus,
    /// Whether the namespace has the `liqo.io/scheduling-enabled` label (any value).
    pub labelled: bool,
    /// Every peer with a local NamespaceMap.
    pub peers: &'a [Peer<'a>],
    /// The local cluster (DefaultName's suffix).
    pub local: &'a ClusterIdentity,
    /// The time of this pass (`lastTransitionTime`).
    pub now: Time,
}

/// What the controller does, in order. The I/O side stops at the first failing action but
/// still writes `Status` (if any) before returning the error.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Add the finalizer.
    AddFinalizer,
    /// Remove the finalizer (deleting, and no remote condition left).
    RemoveFinalizer,
    /// Set `liqo.io/scheduling-enabled: "true"` on the namespace (merge patch).
    Label,
    /// Remove `liqo.io/scheduling-enabled` from the namespace (merge patch with `null`).
    Unlabel,
    /// Set `spec.desiredMapping.<namespace>` in a NamespaceMap (merge patch).
    SetDesired {
        /// The map's namespace.
        map_namespace: String,
        /// The map's name.
        map: String,
        /// The remote namespace name.
        remote: String,
    },
    /// Remove `spec.desiredMapping.<namespace>` from a NamespaceMap (merge patch with `null`).
    RemoveDesired {
        /// The map's namespace.
        map_namespace: String,
        /// The map's name.
        map: String,
    },
    /// Write the status (only when it changes; never together with `RemoveFinalizer`).
    Status(NamespaceOffloadingStatus),
    /// An Event on the NamespaceOffloading (only on a new generation).
    Event {
        /// Warning (true) or Normal.
        warning: bool,
        /// The Event's reason.
        reason: &'static str,
        /// The Event's message.
        message: String,
    },
}

/// The decisions for one NamespaceOffloading.
pub fn decide(o: &Observed<'_>) -> Vec<Action> {
    let mut actions = Vec::new();
    let new_spec = o.status.observed_generation != o.generation;
    let mut requested = vec![false; o.peers.len()];
    let remote = super::remote_namespace(o.namespace, o.spec.namespace_mapping_strategy, o.local);
    let mut failure = None;
    if o.deleting {
        if o.labelled {
            actions.push(Action::Unlabel);
        }
        for p in o.peers.iter().filter(|p| p.desired.is_some()) {
            actions.push(remove(p));
        }
    } else {
        if !o.has_finalizer {
            actions.push(Action::AddFinalizer);
        }
        let sel = o.spec.cluster_selector.as_ref();
        let valid = sel.map_or(Ok(()), selector::validate);
        // Which live peers the selector picks; node-less peers keep their entry.
        let picks: Result<Vec<Option<bool>>, _> = valid.and_then(|()| {
            o.peers
                .iter()
                .map(|p| match p.node.filter(|n| !n.deleting) {
                    Some(n) => selector::selector_matches(sel, n.labels, n.name).map(Some),
                    None => Ok(None),
                })
                .collect()
        });
        match (&remote, picks) {
            (_, Err(e)) => {
                if new_spec {
                    let e = e.under("spec.clusterSelector.");
                    actions.push(warning(
                        INVALID_SELECTOR,
                        format!("Invalid ClusterSelector: {e}"),
                    ));
                }
                for (i, p) in o.peers.iter().enumerate() {
                    requested[i] = p.desired.is_some();
                }
            }
            (Err(e), Ok(picks)) => {
                let why = format!("{e} (use EnforceSameName or a shorter namespace name)");
                if new_spec {
                    actions.push(warning(INVALID_REMOTE_NAME, why.clone()));
                }
                failure = Some(why);
                for (i, (p, pick)) in o.peers.iter().zip(picks).enumerate() {
                    requested[i] = pick.unwrap_or(p.desired.is_some());
                }
            }
            (Ok(name), Ok(picks)) => {
                for (i, (p, pick)) in o.peers.iter().zip(picks).enumerate() {
                    requested[i] = pick.unwrap_or(p.desired.is_some());
                    match pick {
                        Some(true) if p.desired != Some(name.as_str()) => {
                            actions.push(Action::SetDesired {
                                map_namespace: p.map_namespace.to_owned(),
                                map: p.map.to_owned(),
                                remote: name.to_string(),
                            });
                        }
                        Some(false) if p.desired.is_some() => actions.push(remove(p)),
                        _ => {}
                    }
                }
            }
        }
        match (o.spec.pod_offloading_strategy, o.labelled) {
            (PodOffloadingStrategy::Local, true) => actions.push(Action::Unlabel),
            (PodOffloadingStrategy::Local, false) | (_, true) => {}
            (_, false) => actions.push(Action::Label),
        }
    }
    let clusters: Vec<ClusterState<'_>> = o
        .peers
        .iter()
        .zip(&requested)
        .map(|(p, &requested)| ClusterState {
            map: p.map,
            requested,
            phase: p.current.and_then(|c| c.phase),
            failure: failure.as_deref(),
        })
        .collect();
    let next = status::status(
        o.status,
        &clusters,
        o.deleting,
        remote.as_ref().ok().map(NamespaceName::as_str),
        o.generation,
        &o.now,
    );
    if o.deleting && next.remote_namespaces_conditions.is_empty() {
        if o.has_finalizer {
            actions.push(Action::RemoveFinalizer);
        }
    } else if &next != o.status {
        actions.push(Action::Status(next));
    }
    actions
}

fn remove(p: &Peer<'_>) -> Action {
    Action::RemoveDesired {
        map_namespace: p.map_namespace.to_owned(),
        map: p.map.to_owned(),
    }
}

fn warning(reason: &'static str, message: String) -> Action {
    Action::Event {
        warning: true,
        reason,
        message,
    }
}

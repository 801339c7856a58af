//! The NamespaceOffloading status: per remote cluster (keyed by its NamespaceMap's name, the
//! remote cluster's UniqueName) an `OffloadingRequired` condition and, when the cluster is
//! required or its map still reports the namespace, a `Ready` condition, with upstream Liqo
//! v0.5's (and the seed's) exact types, reasons and messages ([`Row`]); and the overall
//! [`OffloadingPhase`] ([`phase`]).
//!
//! It owns these strings and the phase table. It never decides which clusters are selected
//! (that is [`super::consumer`]) and never reads a clock: `now` is an input, and a
//! condition's `lastTransitionTime` changes only when its status does.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    offloading::{
        ConditionStatus, NamespaceOffloadingStatus, OffloadingPhase, RemoteNamespaceCondition,
        RemoteNamespaceConditionType as Type,
    },
    virtualkubelet::MappingPhase,
};

#[cfg(test)]
mod tests;

/// One row of the condition table: a type, a status and their reason and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The condition type.
    pub type_: Type,
    /// Its status.
    pub status: ConditionStatus,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub message: &'static str,
}

/// `OffloadingRequired True`: the selector matches the cluster.
pub const CLUSTER_SELECTED: Row = Row {
    type_: Type::OffloadingRequired,
    status: ConditionStatus::True,
    reason: "ClusterSelected",
    message: "The remote cluster has been selected through the ClusterSelector field",
};
/// `OffloadingRequired False`: the selector does not match the cluster (the seed's message).
pub const CLUSTER_NOT_SELECTED: Row = Row {
    type_: Type::OffloadingRequired,
    status: ConditionStatus::False,
    reason: "ClusterNotSelected",
    message: "You have not selected this cluster through ClusterSelector fields",
};
/// `Ready True`: the provider accepted the remote namespace (the seed's reason and message).
pub const REMOTE_NAMESPACE_CREATED: Row = Row {
    type_: Type::Ready,
    status: ConditionStatus::True,
    reason: "RemoteNamespaceCreated",
    message: "Namespace correctly offloaded on this cluster",
};
/// `Ready False`: the remote namespace cannot be created (a conflict, a refused name).
pub const CREATION_LOOP_BACK_OFF: Row = Row {
    type_: Type::Ready,
    status: ConditionStatus::False,
    reason: "CreationLoopBackOff",
    message: "Some problems occurred during remote namespace creation",
};
/// `Ready False`: the remote namespace is being deleted.
pub const TERMINATING: Row = Row {
    type_: Type::Ready,
    status: ConditionStatus::False,
    reason: "Terminating",
    message: "The remote namespace is being deleted",
};
/// `Ready False`: asked for, not yet accepted by the provider.
pub const CREATING: Row = Row {
    type_: Type::Ready,
    status: ConditionStatus::False,
    reason: "Creating",
    message: "The remote namespace is being created",
};

/// Every row, in the table's order.
pub const ROWS: [Row; 6] = [
    CLUSTER_SELECTED,
    CLUSTER_NOT_SELECTED,
    REMOTE_NAMESPACE_CREATED,
    CREATION_LOOP_BACK_OFF,
    TERMINATING,
    CREATING,
];

/// The overall phase, first match wins: deleting → `Terminating`; no cluster required →
/// `NoClusterSelected`; all required ready → `Ready`; all required failed → `AllFailed`;
/// some failed → `SomeFailed`; otherwise `InProgress`.
pub fn phase(deleting: bool, required: usize, ready: usize, failed: usize) -> OffloadingPhase {
    if deleting {
        OffloadingPhase::Terminating
    } else if required == 0 {
        OffloadingPhase::NoClusterSelected
    } else if ready == required {
        OffloadingPhase::Ready
    } else if failed == required {
        OffloadingPhase::AllFailed
    } else if failed > 0 {
        OffloadingPhase::SomeFailed
    } else {
        OffloadingPhase::InProgress
    }
}

/// One remote cluster as the status sees it, after this pass's mapping decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterState<'a> {
    /// The NamespaceMap's name (the remote cluster's UniqueName): the status key.
    pub map: &'a str,
    /// Whether the cluster is required (selected, or kept desired).
    pub requested: bool,
    /// The phase the provider reports for this namespace (`currentMapping`), if any.
    pub phase: Option<MappingPhase>,
    /// A failure known on this side (a refused remote name): the required cluster's `Ready`
    /// is `False/CreationLoopBackOff` with this message.
    pub failure: Option<&'a str>,
}

/// The `Ready` row for a cluster, and the message when it is not the row's own; `None` when
/// the cluster is neither required nor reported by its map.
fn ready(c: &ClusterState<'_>) -> Option<(Row, Option<String>)> {
    match (c.requested, c.failure, c.phase) {
        (true, Some(failure), _) => Some((CREATION_LOOP_BACK_OFF, Some(failure.to_owned()))),
        (_, _, Some(MappingPhase::Accepted)) => Some((REMOTE_NAMESPACE_CREATED, None)),
        (_, _, Some(MappingPhase::CreationLoopBackOff)) => Some((CREATION_LOOP_BACK_OFF, None)),
        (_, _, Some(MappingPhase::Terminating)) => Some((TERMINATING, None)),
        (true, _, None) => Some((CREATING, None)),
        (false, _, None) => None,
    }
}

/// A condition from a row, keeping the old condition's `lastTransitionTime` when its status
/// is unchanged.
fn condition(
    old: Option<&Vec<RemoteNamespaceCondition>>,
    row: Row,
    message: Option<String>,
    now: &Time,
) -> RemoteNamespaceCondition {
    let kept = old
        .into_iter()
        .flatten()
        .find(|c| c.type_ == row.type_ && c.status == row.status)
        .and_then(|c| c.last_transition_time.clone());
    RemoteNamespaceCondition {
        type_: row.type_,
        status: row.status,
        last_transition_time: Some(kept.unwrap_or_else(|| now.clone())),
        reason: Some(row.reason.to_owned()),
        message: Some(message.unwrap_or_else(|| row.message.to_owned())),
    }
}

/// The whole status. Clusters not listed (vanished maps) lose their entry; while deleting, so
/// do clusters neither required nor reported by their map.
pub fn status(
    old: &NamespaceOffloadingStatus,
    clusters: &[ClusterState<'_>],
    deleting: bool,
    remote_name: Option<&str>,
    generation: Option<i64>,
    now: &Time,
) -> NamespaceOffloadingStatus {
    let mut conditions = BTreeMap::new();
    let (mut required, mut ready_count, mut failed) = (0, 0, 0);
    for c in clusters {
        let ready = ready(c);
        if deleting && !c.requested && ready.is_none() {
            continue;
        }
        let prev = old.remote_namespaces_conditions.get(c.map);
        let selected = if c.requested {
            CLUSTER_SELECTED
        } else {
            CLUSTER_NOT_SELECTED
        };
        let mut list = vec![condition(prev, selected, None, now)];
        required += usize::from(c.requested);
        if let Some((row, message)) = ready {
            if c.requested {
                ready_count += usize::from(row == REMOTE_NAMESPACE_CREATED);
                failed += usize::from(row == CREATION_LOOP_BACK_OFF);
            }
            list.push(condition(prev, row, message, now));
        }
        conditions.insert(c.map.to_owned(), list);
    }
    NamespaceOffloadingStatus {
        remote_namespace_name: remote_name.map(str::to_owned),
        offloading_phase: Some(phase(deleting, required, ready_count, failed)),
        remote_namespaces_conditions: conditions,
        observed_generation: generation,
    }
}

//! The provider's NamespaceMap controller, decided: for one trusted NamespaceMap copy (a
//! consumer's request, `liqo.io/replicated=true`) which remote namespaces to create, bind or
//! delete, and the `currentMapping` it reports back ([`decide`]).
//!
//! Rules (design 15 §3.1, §5.12): a name that is not a DNS-1123 label, or is reserved, is
//! never created; an existing namespace is never adopted (the I/O side creates by POST) and
//! never deleted unless it carries this map's `liqo.io/managed-by-namespace-map` (deletion
//! carries a UID precondition) and never while it holds the consumer's claims of class `liqo`
//! (their data: kept, a Warning Event says why, until they are deleted by name); a phase comes
//! from observation only, never from a call that
//! returned OK. It never talks to the apiserver: the controller observes and acts.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{
        core::v1::Namespace,
        rbac::v1::{RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::{
    api::{
        ClusterId,
        virtualkubelet::{MappingPhase, RemoteNamespaceStatus},
    },
    consts::{labels, offloading},
    names::validate_label,
};

#[cfg(test)]
mod tests;

/// A remote namespace as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsView {
    /// Its UID (the deletion precondition).
    pub uid: String,
    /// Its `liqo.io/managed-by-namespace-map` annotation.
    pub managed_by: Option<String>,
    /// Whether it has a `deletionTimestamp`.
    pub terminating: bool,
    /// The consumer's copies of its claims of class `liqo` there (the data of its offloaded
    /// pods), by name: while any is there the namespace is kept.
    pub claims: Vec<String>,
}

/// What the controller observed for one NamespaceMap copy.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The map's key, `<tenant namespace>/<map name>`: the managed-by annotation's value.
    pub key: &'a str,
    /// `spec.desiredMapping`: local namespace → remote namespace.
    pub desired: &'a BTreeMap<String, String>,
    /// `status.currentMapping`: local namespace → remote namespace and phase.
    pub current: &'a BTreeMap<String, RemoteNamespaceStatus>,
    /// Whether the map has a `deletionTimestamp`.
    pub deleting: bool,
    /// Whether the map carries the NamespaceMap controller's finalizer.
    pub has_finalizer: bool,
    /// The namespaces named in `desired` ∪ `current`, and every namespace annotated with this
    /// map's key (listed by `liqo.io/remote-cluster-id=<origin>`, then filtered on the
    /// annotation), by name.
    pub namespaces: &'a BTreeMap<String, NsView>,
    /// By remote namespace: whether this map's RoleBinding exists there with the right roleRef
    /// and subject.
    pub bindings: &'a BTreeMap<String, bool>,
    /// Names never created nor deleted beyond [`is_reserved`]'s (Liqo's own namespace, which
    /// is configurable).
    pub reserved: &'a BTreeSet<String>,
}

/// What the controller does, in order. The I/O side stops at the first failing action except
/// `Status`, which it writes anyway before returning the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Add the NamespaceMap controller's finalizer to the map.
    AddFinalizer,
    /// Create (POST, never apply) the namespace with the managed-by and original-name
    /// annotations and the `liqo.io/remote-cluster-id=<origin>` label.
    CreateNamespace {
        /// The remote namespace.
        name: String,
        /// The consumer's local namespace (`liqo.io/original-name`).
        original: String,
    },
    /// Apply the RoleBinding binding the consumer to `liqo-virtual-kubelet-remote` there.
    ApplyBinding {
        /// The remote namespace.
        namespace: String,
    },
    /// Delete the namespace with a UID precondition.
    DeleteNamespace {
        /// The remote namespace.
        name: String,
        /// Its observed UID.
        uid: String,
    },
    /// Write `status.currentMapping` (only when it changes).
    Status(BTreeMap<String, RemoteNamespaceStatus>),
    /// A Warning Event on the map.
    Event {
        /// The Event's reason.
        reason: &'static str,
        /// The Event's message.
        message: String,
    },
    /// Remove the finalizer: the map is deleting and reports no namespace any more.
    RemoveFinalizer,
}

/// Event reason: a desired name that is not a namespace name.
pub const INVALID_NAME: &str = "InvalidRemoteNamespaceName";
/// Event reason: a desired name that is reserved on this cluster.
pub const RESERVED_NAME: &str = "ReservedNamespace";
/// Event reason: the namespace exists and is not this map's.
pub const CONFLICT: &str = "NamespaceConflict";
/// Event reason: a namespace to release is not this map's (left alone).
pub const NOT_OURS: &str = "NamespaceNotManaged";
/// Event reason: a namespace to release still holds the consumer's claims (kept until they
/// are deleted by name).
pub const HOLDS_DATA: &str = "NamespaceHoldsData";

/// Deletes namespace `name` (`ns`), unless it holds claims: then a Warning Event names them and
/// says how to let it go.
fn delete_unless_data(
    o: &Observed<'_>,
    name: &str,
    ns: &NsView,
    actions: &mut Vec<Action>,
    events: &mut Vec<Action>,
) {
    if ns.claims.is_empty() {
        actions.push(Action::DeleteNamespace {
            name: name.to_owned(),
            uid: ns.uid.clone(),
        });
        return;
    }
    events.push(Action::Event {
        reason: HOLDS_DATA,
        message: format!(
            "namespace {name:?} is kept: it holds the data of the consumer's claims {:?} \
             (NamespaceMap {:?}); it goes once they are deleted: by the consumer (its claims \
             deleted by name, or `liqoctl unoffload --delete-remote-volumes` before \
             unoffloading) or here (`kubectl delete pvc -n {name} ...`)",
            ns.claims, o.key
        ),
    });
}

/// Names no consumer may have created or deleted, whatever the map says: `default`,
/// `kube-*` (`kube-system`, `kube-public`, `kube-node-lease`) and tenant namespaces
/// (`liqo-tenant-*`).
pub fn is_reserved(name: &str) -> bool {
    name == "default"
        || name.starts_with("kube-")
        || name.starts_with(crate::consts::objects::TENANT_NAMESPACE_PREFIX)
}

fn reserved(o: &Observed<'_>, name: &str) -> bool {
    is_reserved(name) || o.reserved.contains(name)
}

fn entry(remote: &str, phase: MappingPhase) -> RemoteNamespaceStatus {
    RemoteNamespaceStatus {
        remote_namespace: Some(remote.to_owned()),
        phase: Some(phase),
    }
}

/// The decisions for one map. `RemoveFinalizer` (deleting) waits until `currentMapping` is
/// empty and no namespace of this map is observed any more.
pub fn decide(o: &Observed<'_>) -> Vec<Action> {
    let mut actions = Vec::new();
    if !o.deleting && !o.has_finalizer {
        actions.push(Action::AddFinalizer);
    }
    let mut events = Vec::new();
    let mut next = BTreeMap::new();
    // Remote names this pass accounts for; any other namespace of ours is an orphan.
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let locals: BTreeSet<&String> = o.desired.keys().chain(o.current.keys()).collect();
    for local in locals {
        let want = o.desired.get(local).filter(|_| !o.deleting);
        let had = o.current.get(local);
        let had_remote = had.and_then(|h| h.remote_namespace.as_deref());
        seen.extend(had_remote);
        // A namespace reported under another name is released first.
        if let Some(old) = had_remote.filter(|old| want.is_none_or(|w| w != old))
            && let Some(phase) = release(o, old, &mut actions, &mut events)
        {
            next.insert(local.clone(), entry(old, phase));
            continue;
        }
        let Some(remote) = want else { continue };
        seen.insert(remote);
        let was_backoff = had.and_then(|h| h.phase) == Some(MappingPhase::CreationLoopBackOff);
        let mut backoff = |reason, message: String| {
            if !was_backoff {
                events.push(Action::Event { reason, message });
            }
            Some(entry(remote, MappingPhase::CreationLoopBackOff))
        };
        let phase = if let Err(e) = validate_label(remote) {
            backoff(INVALID_NAME, format!("refusing namespace {local:?}: {e}"))
        } else if reserved(o, remote) {
            let why = format!("namespace {remote:?} is reserved on this cluster");
            backoff(RESERVED_NAME, why)
        } else {
            match o.namespaces.get(remote) {
                None => {
                    actions.push(Action::CreateNamespace {
                        name: remote.clone(),
                        original: local.clone(),
                    });
                    None
                }
                Some(ns) if ns.managed_by.as_deref() != Some(o.key) => backoff(
                    CONFLICT,
                    format!(
                        "namespace {remote:?} already exists and it is not managed by NamespaceMap {:?}",
                        o.key
                    ),
                ),
                Some(ns) if ns.terminating => Some(entry(remote, MappingPhase::Terminating)),
                Some(_) if o.bindings.get(remote).copied().unwrap_or(false) => {
                    Some(entry(remote, MappingPhase::Accepted))
                }
                Some(_) => {
                    actions.push(Action::ApplyBinding {
                        namespace: remote.clone(),
                    });
                    None
                }
            }
        };
        if let Some(phase) = phase {
            next.insert(local.clone(), phase);
        }
    }
    // Ours but named by no entry (asked for, then withdrawn before it was reported).
    for (name, ns) in o.namespaces {
        let ours = ns.managed_by.as_deref() == Some(o.key);
        if ours && !ns.terminating && !seen.contains(name.as_str()) && !reserved(o, name) {
            delete_unless_data(o, name, ns, &mut actions, &mut events);
        }
    }
    let any_ours = o
        .namespaces
        .iter()
        .any(|(name, ns)| ns.managed_by.as_deref() == Some(o.key) && !reserved(o, name));
    if o.deleting && next.is_empty() && !any_ours {
        actions.extend(events);
        if o.has_finalizer {
            actions.push(Action::RemoveFinalizer);
        }
        return actions;
    }
    if &next != o.current {
        actions.push(Action::Status(next));
    }
    actions.extend(events);
    actions
}

/// Releases a namespace no longer wanted under this name: deletes it when it is this map's
/// and live. The phase to report, or `None` when the entry is dropped (absent, not ours,
/// reserved).
fn release(
    o: &Observed<'_>,
    remote: &str,
    actions: &mut Vec<Action>,
    events: &mut Vec<Action>,
) -> Option<MappingPhase> {
    let ns = o.namespaces.get(remote)?;
    if ns.managed_by.as_deref() != Some(o.key) || reserved(o, remote) {
        events.push(Action::Event {
            reason: NOT_OURS,
            message: format!(
                "Namespace {remote:?} is not associated with NamespaceMap {:?}: left alone",
                o.key
            ),
        });
        return None;
    }
    if !ns.terminating {
        delete_unless_data(o, remote, ns, actions, events);
    }
    Some(MappingPhase::Terminating)
}

/// The remote namespace to create (POST): `liqo.io/managed-by-namespace-map=<key>` and
/// `liqo.io/original-name=<local>` annotations, `liqo.io/remote-cluster-id=<consumer>` label.
pub fn namespace(name: &str, original: &str, key: &str, origin: &ClusterId) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(BTreeMap::from([
                (
                    offloading::MANAGED_BY_NAMESPACE_MAP.to_owned(),
                    key.to_owned(),
                ),
                (offloading::ORIGINAL_NAME.to_owned(), original.to_owned()),
            ])),
            labels: Some(BTreeMap::from([(
                labels::REMOTE_CLUSTER_ID.to_owned(),
                origin.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The RoleBinding in a remote namespace, named after the map's (tenant) namespace: the
/// consumer's identity (user = its cluster ID, the CN of its certificate) bound to
/// `liqo-virtual-kubelet-remote`.
pub fn role_binding(
    namespace: &str,
    key: &str,
    map_namespace: &str,
    origin: &ClusterId,
) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(map_namespace.to_owned()),
            namespace: Some(namespace.to_owned()),
            annotations: Some(BTreeMap::from([(
                offloading::MANAGED_BY_NAMESPACE_MAP.to_owned(),
                key.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: RBAC_GROUP.to_owned(),
            kind: "ClusterRole".to_owned(),
            name: offloading::VIRTUAL_KUBELET_REMOTE_CLUSTER_ROLE.to_owned(),
        },
        subjects: Some(vec![Subject {
            api_group: Some(RBAC_GROUP.to_owned()),
            kind: "User".to_owned(),
            name: origin.to_string(),
            namespace: None,
        }]),
    }
}

/// Whether an observed RoleBinding is the one [`role_binding`] makes (roleRef and subjects):
/// the `bindings` of [`Observed`].
pub fn binding_is_right(found: &RoleBinding, origin: &ClusterId) -> bool {
    let want = role_binding("", "", "", origin);
    found.role_ref == want.role_ref && found.subjects == want.subjects
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

//! The provider's side of the ShadowPod contract (§2.3, §2.4 of the control-plane spec): the
//! pod made for a consumer's ShadowPod ([`pod_of`]: same name and namespace, its labels plus
//! `liqo.io/managed-by=shadowpod`, controlled by it), the consumer's spec confined to what a
//! pod in its namespace may do ([`confine`]), and the ShadowPod controller's decision
//! ([`decide`]: create when absent, wait while terminating, warn when another controls it;
//! [`reap`]: the pod of a ShadowPod that goes is deleted at once, unless that deletion orphans
//! it). Pure: the
//! controller-manager's `offloading::shadowpod` carries it out.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{Pod, PodSpec},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Resource, ResourceExt};

use crate::{api::virtualkubelet::ShadowPod, consts::reflection, lean::ORPHAN};

/// How soon a ShadowPod is observed again while the pod of its name is terminating (or a
/// create found one that the cache had not shown yet).
pub const TERMINATING_AGAIN: Duration = Duration::from_secs(1);

/// The Event reason of a pod of the ShadowPod's name that it does not control.
pub const FOREIGN_POD: &str = "PodNotControlled";

/// The label selector of the pods this controller makes.
pub fn pods_selector() -> String {
    format!(
        "{}={}",
        reflection::MANAGED_BY,
        reflection::MANAGED_BY_SHADOWPOD
    )
}

/// The Event reason of a ShadowPod whose spec asked for what a consumer may not have.
pub const CONFINED: &str = "SpecConfined";

/// What to do for one ShadowPod.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create its pod ([`made`] from the whole ShadowPod).
    Create,
    /// Observe again after this long (the pod of its name is terminating).
    Again(Duration),
    /// A Warning Event on the ShadowPod (reason, message); nothing else.
    Warn(&'static str, String),
    /// Delete its pod (the ShadowPod is being deleted): this one, as it was seen.
    Reap(Doomed),
    /// Nothing: its pod stands, or it is gone or terminating while the ShadowPod is deleted,
    /// or that deletion orphans it.
    Nothing,
}

/// Whether `pod` (a Pod, or only its metadata) is controlled by the ShadowPod of UID `uid`.
pub fn controlled_by(pod: &impl Resource, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid && o.kind == "ShadowPod")
}

/// A consumer's pod spec confined to what a pod in its namespace may do here: no host
/// network, PID or IPC namespace, no node name, node selector, affinity, scheduler, priority
/// or preemption, no ServiceAccount token mounted. Returns the spec and the fields removed.
pub fn confine(spec: &PodSpec) -> (PodSpec, Vec<&'static str>) {
    let mut out = spec.clone();
    let mut removed = Vec::new();
    let mut clear = |set: bool, field: &'static str| {
        if set {
            removed.push(field);
        }
    };
    clear(out.host_network == Some(true), "hostNetwork");
    clear(out.host_pid == Some(true), "hostPID");
    clear(out.host_ipc == Some(true), "hostIPC");
    clear(out.node_name.is_some(), "nodeName");
    clear(out.node_selector.is_some(), "nodeSelector");
    clear(out.affinity.is_some(), "affinity");
    clear(out.scheduler_name.is_some(), "schedulerName");
    clear(out.priority.is_some(), "priority");
    clear(out.priority_class_name.is_some(), "priorityClassName");
    clear(out.preemption_policy.is_some(), "preemptionPolicy");
    clear(
        out.automount_service_account_token == Some(true),
        "automountServiceAccountToken",
    );
    out.host_network = Some(false);
    out.host_pid = Some(false);
    out.host_ipc = Some(false);
    out.node_name = None;
    out.node_selector = None;
    out.affinity = None;
    out.scheduler_name = None;
    out.priority = None;
    out.priority_class_name = None;
    out.preemption_policy = None;
    out.automount_service_account_token = Some(false);
    (out, removed)
}

/// The pod of a ShadowPod: same name and namespace, its labels plus
/// `liqo.io/managed-by=shadowpod`, its annotations, its `spec.pod` ([`confine`]d), controlled
/// by it. `None` when the ShadowPod has no name or UID (never from the API server).
pub fn pod_of(shadow: &ShadowPod) -> Option<Pod> {
    let mut labels = shadow.labels().clone();
    labels.insert(
        reflection::MANAGED_BY.to_owned(),
        reflection::MANAGED_BY_SHADOWPOD.to_owned(),
    );
    let owner = OwnerReference {
        api_version: ShadowPod::api_version(&()).into_owned(),
        kind: ShadowPod::kind(&()).into_owned(),
        name: shadow.meta().name.clone()?,
        uid: shadow.meta().uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut annotations = shadow.annotations().clone();
    // The consumer's own bookkeeping, not the pod's.
    annotations.remove(reflection::SHADOW_DIGEST);
    Some(Pod {
        metadata: ObjectMeta {
            name: shadow.meta().name.clone(),
            namespace: shadow.meta().namespace.clone(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(confine(&shadow.spec.pod).0),
        status: None,
    })
}

/// The pod of a ShadowPod ([`pod_of`]) and what [`confine`] removed from its spec.
pub fn made(shadow: &ShadowPod) -> Option<(Pod, Vec<&'static str>)> {
    let pod = pod_of(shadow)?;
    Some((pod, confine(&shadow.spec.pod).1))
}

/// The decision for a ShadowPod (its metadata: what the controller's store keeps) given the
/// pod of its name (if any): create it when absent; wait while it terminates; warn when
/// another controls it; else nothing. The pod of a ShadowPod being deleted is deleted
/// ([`reap`]).
pub fn decide(shadow: &impl Resource, pod: Option<&impl Resource>) -> Action {
    let uid = shadow.meta().uid.clone().unwrap_or_default();
    if shadow.meta().deletion_timestamp.is_some() {
        let orphans = shadow
            .meta()
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == ORPHAN);
        if orphans {
            return Action::Nothing;
        }
        return reap(&uid, pod).map_or(Action::Nothing, Action::Reap);
    }
    match pod {
        None if shadow.meta().name.is_some() && !uid.is_empty() => Action::Create,
        None => Action::Nothing,
        Some(p) if p.meta().deletion_timestamp.is_some() => Action::Again(TERMINATING_AGAIN),
        Some(p) if controlled_by(p, &uid) => Action::Nothing,
        Some(p) => Action::Warn(
            FOREIGN_POD,
            format!(
                "Pod {}/{} exists and is not controlled by this ShadowPod: left alone",
                p.namespace().unwrap_or_default(),
                p.name_any()
            ),
        ),
    }
}

/// The pod to delete, as it was seen: its UID and resource version, the delete's
/// preconditions (a pod changed since, for one orphaned by the garbage collector, is read
/// again and decided on anew).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doomed {
    /// Its UID.
    pub uid: String,
    /// Its resource version when seen.
    pub resource_version: Option<String>,
}

/// The pod to delete once the ShadowPod of UID `uid` is deleted or being deleted (unless that
/// deletion orphans it: [`decide`]): the pod of its name, if it is controlled by that
/// ShadowPod and not terminating yet. Else none: no pod, another's (a pod the ShadowPod did
/// not make, or a later ShadowPod's of the same name, or one orphaned), or one already going.
///
/// Why not leave it to the garbage collector, which deletes it too: kube-controller-manager's
/// collector reads the pod and the owner, then deletes, with a client limited to 20 requests a
/// second; ten thousand pods took it 25 minutes, while they held their node's resources. The
/// delete here is one request, under the controller-manager's own limits; the collector then
/// finds the pod gone.
pub fn reap(uid: &str, pod: Option<&impl Resource>) -> Option<Doomed> {
    let pod = pod?;
    let ours = !uid.is_empty() && controlled_by(pod, uid);
    if !ours || pod.meta().deletion_timestamp.is_some() {
        return None;
    }
    Some(Doomed {
        uid: pod.meta().uid.clone()?,
        resource_version: pod.meta().resource_version.clone(),
    })
}

#[cfg(test)]
#[path = "provider_tests.rs"]
mod tests;

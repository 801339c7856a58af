//! The consumer's virtual kubelet's reflection of one local pod (§2.3 steps 1–7 and the fallback),
//! from what its stores hold: pure, no I/O, time as an input. The caller counts the restarts
//! ([`track_restarts`]) of the [`current_remote`] pod before, decides without IPs, maps the IPs
//! only when a status is to be written ([`needs_ips`]) and decides again, and performs the
//! [`Action`]s in order ([`without_status`] when the mapping failed: everything else still
//! happens); it queues the pod again when [`label_in`] says its label is due alone.

use crate::{
    api::{ClusterId, virtualkubelet::ShadowPod},
    consts::reflection::SHADOW_DIGEST,
    shadowpod::consumer::{self as forge, StatusInputs},
};
use k8s_openapi::{
    api::core::v1::{Pod, PodStatus},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};

/// The reason of the Warning Event on a local pod whose remote name is taken by an object
/// that is not ours.
pub const REASON_NOT_OURS: &str = "FailedReflection";

/// The note of the Warning Event [`REASON_NOT_OURS`].
pub fn not_ours_note(kind: &str, namespace: &str, name: &str) -> String {
    format!(
        "remote {kind} {namespace}/{name} exists and is not managed by Liqo's reflection from \
         this cluster: left untouched"
    )
}

/// Who we are and what the caller resolved for this pod.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The home cluster.
    pub home: &'a ClusterId,
    /// The provider.
    pub foreign: &'a ClusterId,
    /// The virtual node's IP (every offloaded pod's `hostIP`).
    pub node_ip: &'a str,
    /// The home API server as the provider's pods reach it, with API server support on
    /// (offloaded pods get tokens of their ServiceAccounts).
    pub api: Option<&'a crate::shadowpod::token::HomeApi>,
    /// The remote pod's IPs as home sees them (empty without a remote pod or its IP).
    pub pod_ips: &'a [String],
    /// The remote pods replaced so far ([`track_restarts`]).
    pub restarts: i32,
    /// Now (conditions' transition time of a rejected pod).
    pub now: Time,
}

/// Where the pod's namespace goes.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// Not (or no longer) offloaded to this provider: the fallback.
    Unmapped,
    /// Offloaded to `namespace`, where the stores hold `shadow` and `remote` of this name.
    Mapped {
        /// The remote namespace.
        namespace: &'a str,
        /// The metadata of the remote ShadowPod of the same name (what its store keeps:
        /// `crate::lean::shadow`).
        shadow: Option<&'a ObjectMeta>,
        /// The remote Pod of the same name (ours by its labels; its status is used only if
        /// it is the [`current_remote`] pod of `shadow`).
        remote: Option<&'a Pod>,
    },
}

pub use super::provider::controlled_by;
use super::recheck::labelled;
pub use super::recheck::{LABEL_AFTER, PROBE_AFTER, label_in, probe_foreign};

/// The remote pod whose status counts: `remote` only if the ShadowPod `shadow` controls it
/// (a same-name pod of an earlier ShadowPod, still terminating after a re-create, lends
/// neither its status, its IPs nor a restart).
pub fn current_remote<'a>(shadow: Option<&ObjectMeta>, remote: Option<&'a Pod>) -> Option<&'a Pod> {
    let uid = shadow?.uid.as_deref()?;
    remote.filter(|r| controlled_by(*r, uid))
}

/// Whether the IPs must be mapped: `actions` (decided without IPs) write a status and the
/// remote pod has IPs.
pub fn needs_ips(actions: &[Action], remote_ips: &[String]) -> bool {
    !remote_ips.is_empty()
        && actions
            .iter()
            .any(|a| matches!(a, Action::WriteStatus { .. }))
}

/// `actions` without the status write (the IPs could not be mapped: the rest still happens,
/// the status after a retry); a label it carried is written alone.
pub fn without_status(actions: Vec<Action>) -> Vec<Action> {
    actions
        .into_iter()
        .filter_map(|a| match a {
            Action::WriteStatus { label: true, .. } => Some(Action::LabelLocal),
            Action::WriteStatus { .. } => None,
            other => Some(other),
        })
        .collect()
}

/// One step, in the order returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A Warning Event on the local pod.
    Warn {
        /// Its reason.
        reason: &'static str,
        /// Its note.
        note: String,
    },
    /// Delete the remote ShadowPod (UID precondition).
    DeleteShadow {
        /// Its UID.
        uid: String,
    },
    /// Delete the local pod with grace 0 (UID precondition).
    DeleteLocal {
        /// Its UID.
        uid: String,
    },
    /// Label the local pod `liqo.io/shadowPod=true` in a write of its own: its ShadowPod is
    /// [`LABEL_AFTER`] old and no status write carried it, or the status write that was to
    /// carry it waits for the IPs ([`without_status`]).
    LabelLocal,
    /// Create the remote ShadowPod (a create, not an apply: the stores only hold our objects,
    /// and an object of that name that is not ours must fail the create, never be taken
    /// over).
    CreateShadow(Box<ShadowPod>),
    /// Update our remote ShadowPod (server-side apply).
    UpdateShadow(Box<ShadowPod>),
    /// Write the local pod's status subresource; with `label`, the same request labels it
    /// `liqo.io/shadowPod=true` (a Pod's status subresource takes label changes: one write to
    /// the home API server per offloaded pod, not two).
    WriteStatus {
        /// The status.
        status: Box<PodStatus>,
        /// Label it too.
        label: bool,
    },
    /// Drop what is remembered about the pod (restarts, IPs).
    Forget,
}

/// The remote pods a local pod saw replaced, and the current one's UID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restarts {
    /// The UID of the remote pod last seen.
    pub remote_uid: Option<String>,
    /// Replacements so far.
    pub count: i32,
}

/// The restarts after seeing `remote` (upstream `HandleStatus`): one more each time the
/// remote UID changes; at the first sighting (a restarted virtual kubelet), the gap between
/// the local and the remote restart counts.
pub fn track_restarts(prev: Option<&Restarts>, local: &PodStatus, remote: &Pod) -> Restarts {
    let uid = remote.metadata.uid.clone();
    match prev {
        Some(p) if p.remote_uid == uid => p.clone(),
        Some(p) if p.remote_uid.is_some() => Restarts {
            remote_uid: uid,
            count: p.count.saturating_add(1),
        },
        _ => Restarts {
            remote_uid: uid,
            count: remote
                .status
                .as_ref()
                .map_or(0, |r| forge::infer_restarts(local, r)),
        },
    }
}

fn uid(meta: &ObjectMeta) -> String {
    meta.uid.clone().unwrap_or_default()
}

pub(super) fn terminating(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// The actions for local pod `local` (absent: deleted) given its `target`.
pub fn decide(local: Option<&Pod>, target: Target<'_>, ctx: &Context<'_>) -> Vec<Action> {
    match target {
        Target::Unmapped => fallback(local, ctx),
        Target::Mapped {
            namespace,
            shadow,
            remote,
        } => mapped(local, namespace, shadow, remote, ctx),
    }
}

/// A pod on the node whose namespace is not offloaded here (upstream `FallbackPodReflector`).
fn fallback(local: Option<&Pod>, ctx: &Context<'_>) -> Vec<Action> {
    let Some(local) = local else {
        return vec![Action::Forget];
    };
    if terminating(&local.metadata) {
        return vec![Action::DeleteLocal {
            uid: uid(&local.metadata),
        }];
    }
    let status = local.status.clone().unwrap_or_default();
    let Some((phase, reason)) = forge::rejection(&status) else {
        return vec![];
    };
    let rejected = forge::rejected_status(&status, phase, reason, ctx.now.clone());
    if same_status(&status, &rejected) {
        vec![]
    } else {
        vec![Action::WriteStatus {
            status: Box::new(rejected),
            label: false,
        }]
    }
}

fn mapped(
    local: Option<&Pod>,
    namespace: &str,
    shadow: Option<&ObjectMeta>,
    remote: Option<&Pod>,
    ctx: &Context<'_>,
) -> Vec<Action> {
    // 1. Never touch what is not ours: a live pod is warned about it; for a pod going or
    // gone it is as if absent (nothing of ours is there: the pod's deletion finishes, its
    // records are forgotten).
    let foreign_remote = remote
        .is_some_and(|r| !forge::is_reflected(r.metadata.labels.as_ref(), ctx.home, ctx.foreign));
    let foreign_shadow =
        shadow.is_some_and(|s| !forge::is_reflected(s.labels.as_ref(), ctx.home, ctx.foreign));
    if let Some(local) = local
        && (foreign_remote || foreign_shadow)
        && !terminating(&local.metadata)
    {
        let what = if foreign_shadow { "ShadowPod" } else { "Pod" };
        let name = local.metadata.name.as_deref().unwrap_or_default();
        return vec![Action::Warn {
            reason: REASON_NOT_OURS,
            note: not_ours_note(what, namespace, name),
        }];
    }
    let shadow = shadow.filter(|_| !foreign_shadow);
    let remote = remote.filter(|_| !foreign_remote);
    // 2. Local gone: the ShadowPod goes (the provider's GC removes the pod).
    let Some(local) = local else {
        return match shadow {
            Some(s) if !terminating(s) => {
                vec![Action::DeleteShadow { uid: uid(s) }, Action::Forget]
            }
            _ => vec![Action::Forget],
        };
    };
    // Only the pod of the current ShadowPod gives its status.
    let current = current_remote(shadow, remote);
    // 3. Local terminating: ShadowPod first, then the local pod once both remote are gone.
    if terminating(&local.metadata) {
        return match (shadow, remote) {
            (None, None) => vec![
                Action::DeleteLocal {
                    uid: uid(&local.metadata),
                },
                Action::Forget,
            ],
            (Some(s), _) if !terminating(s) => vec![Action::DeleteShadow { uid: uid(s) }],
            _ => status(local, current, ctx)
                .map(|status| Action::WriteStatus {
                    status,
                    label: false,
                })
                .into_iter()
                .collect(),
        };
    }
    // 4. Rejected for good: only make sure nothing runs remotely.
    let local_status = local.status.clone().unwrap_or_default();
    if forge::is_aborted(&local_status) {
        return match shadow {
            Some(s) if !terminating(s) => vec![Action::DeleteShadow { uid: uid(s) }],
            _ => vec![],
        };
    }
    let mut actions = Vec::new();
    // 6. The ShadowPod as forged.
    let forged = forge::shadow_pod(local, namespace, ctx.home, ctx.foreign, ctx.api);
    match shadow {
        // Its status comes with the remote pod's events.
        None => return vec![Action::CreateShadow(Box::new(forged))],
        // A ShadowPod of a previous pod of this name still going: wait for its deletion.
        Some(s) if terminating(s) => return actions,
        Some(s) if !same_shadow(s, &forged) => actions.push(Action::UpdateShadow(Box::new(forged))),
        Some(_) => {}
    }
    // 7. The status back; 5. the local pod marked as offloaded by the first status write (no
    // write of its own, nor one before the ShadowPod's, which is what the pod waits for), or
    // in a write of its own once its ShadowPod is LABEL_AFTER old, after the status if there
    // is one: a label the API server refuses on the status (a policy, say) never holds the
    // status back (the virtual kubelet writes it again without the label). (A status write
    // that keeps failing holds the label back: the status is what the pod's users wait for.)
    let due = label_in(local, shadow, ctx) == Some(std::time::Duration::ZERO);
    if let Some(status) = status(local, current, ctx) {
        let label = !due && !labelled(local);
        actions.push(Action::WriteStatus { status, label });
    }
    if due {
        actions.push(Action::LabelLocal);
    }
    actions
}

/// Whether the remote ShadowPod has the forged labels, annotations and spec: its digest is
/// the forged one's (one without a digest, from an older virtual kubelet, is forged again).
fn same_shadow(current: &ObjectMeta, forged: &ShadowPod) -> bool {
    let digest = |m: &ObjectMeta| m.annotations.as_ref()?.get(SHADOW_DIGEST).cloned();
    digest(current).is_some() && digest(current) == digest(&forged.metadata)
}

/// Whether two statuses serialize the same (as the API server would store them).
pub fn same_status(a: &PodStatus, b: &PodStatus) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Step 7: the local status from the remote pod's, when it differs.
fn status(local: &Pod, remote: Option<&Pod>, ctx: &Context<'_>) -> Option<Box<PodStatus>> {
    let remote_status = remote?.status.as_ref()?;
    let forged = forge::local_status(
        remote_status,
        &StatusInputs {
            pod_ips: ctx.pod_ips,
            node_ip: ctx.node_ip,
            restarts: ctx.restarts,
            generation: local.metadata.generation,
        },
    );
    let current = local.status.clone().unwrap_or_default();
    let nothing_new =
        same_status(&current, &forged) || only_scheduled(&current) && only_scheduled(&forged);
    (!nothing_new).then(|| Box::new(forged))
}

/// Whether a status says no more than "Pending, scheduled": no container, IP, reason or
/// message, and no condition but `PodScheduled` true. The home pod says so from its own
/// scheduler on; a remote pod says so from its creation until its kubelet reports, and
/// writing that back would only change times and the host IP (two writes per pod for
/// nothing). An unschedulable remote pod, or any container news, is written.
fn only_scheduled(s: &PodStatus) -> bool {
    matches!(s.phase.as_deref(), None | Some("Pending"))
        && s.container_statuses.as_ref().is_none_or(Vec::is_empty)
        && s.init_container_statuses.as_ref().is_none_or(Vec::is_empty)
        && s.ephemeral_container_statuses
            .as_ref()
            .is_none_or(Vec::is_empty)
        && s.pod_ip.is_none()
        && s.pod_ips.as_ref().is_none_or(Vec::is_empty)
        && s.reason.is_none()
        && s.message.is_none()
        && s.nominated_node_name.is_none()
        && s.conditions
            .iter()
            .flatten()
            .all(|c| c.type_ == "PodScheduled" && c.status == "True")
}

/// The JSON merge patch turning status `current` into `target`: every field of `target`, and
/// `null` for the top-level fields only `current` has (lists and objects are replaced whole).
pub fn status_patch(current: &PodStatus, target: &PodStatus) -> serde_json::Value {
    let as_map = |s: &PodStatus| match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let mut patch = as_map(target);
    for k in as_map(current).keys() {
        if !patch.contains_key(k) {
            patch.insert(k.clone(), serde_json::Value::Null);
        }
    }
    serde_json::Value::Object(patch)
}

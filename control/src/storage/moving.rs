//! `liqoctl move volume`: whether a claim of class `liqo` may be moved to a node, the objects
//! a move makes, and how it ends (manual §20.1.3; safer than upstream, which deletes the
//! original before the copy is restored).
//!
//! A move copies the claim's data into a new claim of class `liqo` selected on the target
//! node (named after the claim's UID, [`Names`]): a receiver Job on the target mounts the new
//! claim, a sender Job mounts the original (on its node: a provider's, through the virtual
//! kubelet, or this cluster's), and `liqo-mover` carries every file through a ClusterIP
//! Service over the network fabric, with a token from a Secret; each side prints a manifest
//! (a sha256 over every entry's path, mode, owner, size and content, the receiver's re-read
//! from disk), and the two must be equal. Only then is the new volume re-bound to a claim of
//! the original name ([`rebound_claim`]) and the original deleted (its data with it). Until
//! then the original claim, its volume and its data are never touched: a move that fails or
//! is killed leaves them as they were (its leftovers, labelled [`MOVE_OF`], go at the next
//! try).
//!
//! Pure: it reads no API server and no clock; `liqoctl` does the I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};

use super::{is_virtual, provision::NodeKind, selected_node};

/// Label on every object a move makes: the UID of the claim being moved.
pub const MOVE_OF: &str = "storage.liqo.io/move-of";
/// Label on a move's pods: `receive` or `send`.
pub const ROLE: &str = "storage.liqo.io/move-role";
/// Annotation on the new volume while it is re-bound: the claim it goes to, as JSON (what
/// [`rebound_claim`] made; a move killed after the original was deleted is finished from it).
pub const MOVED_CLAIM: &str = "storage.liqo.io/moved-claim";
/// Annotation on the new volume while it is re-bound: the UID of the claim it was copied
/// from (only that claim's going lets the switch go on; only while that claim is still there
/// may the copy be discarded).
pub const MOVED_FROM_UID: &str = "storage.liqo.io/moved-from-uid";
/// Annotation on the new volume while it is re-bound: its reclaim policy before the move
/// (restored at the end; `Retain` meanwhile keeps it when the move's claim goes).
pub const RECLAIM_BEFORE: &str = "storage.liqo.io/reclaim-before-move";
/// The receiver's port.
pub const PORT: i32 = 8080;
/// Where the Jobs mount the volumes.
pub const MOUNT: &str = "/data";
/// The mover's program in the controller-manager's image.
pub const PROGRAM: &str = "/usr/local/bin/liqo-mover";
/// The Secret key (and environment variable) of the token.
pub const TOKEN_ENV: &str = "LIQO_MOVER_TOKEN";

/// Why a move is refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not of class `liqo`.
    #[error(
        "{claim} is of class {class:?}, not liqo: move volume moves claims of the virtual \
         storage class liqo only"
    )]
    NotLiqo {
        /// `namespace/name`.
        claim: String,
        /// Its class.
        class: String,
    },
    /// Not bound: no data yet.
    #[error("{claim} is not bound (phase {phase}): there is no data to move")]
    NotBound {
        /// `namespace/name`.
        claim: String,
        /// Its phase.
        phase: String,
    },
    /// Marked for deletion.
    #[error("{claim} is being deleted")]
    Deleting {
        /// `namespace/name`.
        claim: String,
    },
    /// Pods mount it.
    #[error(
        "{claim} is mounted by {}: delete them (or scale their workload to zero) first; a \
         volume is moved only while nothing writes to it",
        pods.join(", ")
    )]
    Mounted {
        /// `namespace/name`.
        claim: String,
        /// `namespace/name (on node)` of each pod.
        pods: Vec<String>,
    },
    /// The target node does not exist.
    #[error("node {node:?} does not exist")]
    NoNode {
        /// The target.
        node: String,
    },
    /// The target is a virtual node.
    #[error(
        "{node} is a virtual node: moving onto a provider is not supported; move to a node of \
         this cluster (a claim whose first consumer lands on a virtual node is made there)"
    )]
    Virtual {
        /// The target.
        node: String,
    },
    /// Its data is on the target already.
    #[error("{claim} is on node {node} already")]
    There {
        /// `namespace/name`.
        claim: String,
        /// The target.
        node: String,
    },
}

fn id(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The pods (not finished) whose volumes name claim `name` of their namespace.
pub fn mounting<'p>(name: &str, pods: &'p [Pod]) -> Vec<&'p Pod> {
    pods.iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter(|p| {
            p.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == name)
                })
        })
        .collect()
}

/// The pods that used claim `name` since the move's check, which listed the pods of UIDs
/// `seen`: one not finished that mounts it, or one made since (finished or not: it may have
/// written what the copy lacks). The move's own pods (label [`MOVE_OF`] = `moved`) are not.
pub fn used_since<'p>(
    name: &str,
    moved: &str,
    pods: &'p [Pod],
    seen: &std::collections::BTreeSet<String>,
) -> Vec<&'p Pod> {
    let live = mounting(name, pods);
    pods.iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MOVE_OF))
                .map(String::as_str)
                != Some(moved)
        })
        .filter(|p| {
            let new = !p.metadata.uid.as_ref().is_some_and(|u| seen.contains(u));
            let names_it = p
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == name)
                });
            names_it && (new || live.iter().any(|l| std::ptr::eq(*l, *p)))
        })
        .collect()
}

/// Whether `claim` may be moved to node `target` (what it is: `kind`), given the pods of its
/// namespace.
pub fn check(
    claim: &PersistentVolumeClaim,
    pods: &[Pod],
    target: &str,
    kind: NodeKind,
) -> Result<(), Refusal> {
    let name = id(claim);
    if !is_virtual(claim) {
        let class = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone());
        return Err(Refusal::NotLiqo {
            claim: name,
            class: class.unwrap_or_else(|| "(default)".into()),
        });
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(Refusal::Deleting { claim: name });
    }
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Bound") {
        return Err(Refusal::NotBound {
            claim: name,
            phase: phase.unwrap_or("none").into(),
        });
    }
    let by = mounting(claim.metadata.name.as_deref().unwrap_or_default(), pods);
    if !by.is_empty() {
        let pods = by
            .iter()
            .map(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
                format!(
                    "pod {}/{} (on {})",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default(),
                    node.unwrap_or("no node yet")
                )
            })
            .collect();
        return Err(Refusal::Mounted { claim: name, pods });
    }
    match kind {
        NodeKind::Missing => Err(Refusal::NoNode {
            node: target.into(),
        }),
        NodeKind::Virtual => Err(Refusal::Virtual {
            node: target.into(),
        }),
        NodeKind::Physical if selected_node(claim) == Some(target) => Err(Refusal::There {
            claim: name,
            node: target.into(),
        }),
        NodeKind::Physical => Ok(()),
    }
}

/// The names of a move's objects, from the moved claim's UID: one move per claim at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The claim's UID.
    pub uid: String,
    /// `liqo-move-<first 8 of the UID>`: the new claim, the Secret and the Service.
    pub base: String,
    /// What tells this try's Jobs from an earlier try's (empty: none given).
    pub attempt: String,
}

impl Names {
    /// The names for moving the claim of UID `uid` (what finds every try's objects: the
    /// labels; the Jobs' names of no try in particular).
    pub fn new(uid: &str) -> Names {
        let short: String = uid.chars().filter(|c| *c != '-').take(8).collect();
        Names {
            uid: uid.to_owned(),
            base: format!("liqo-move-{short}"),
            attempt: String::new(),
        }
    }

    /// The names of one try of the move: its Jobs named apart from an earlier try's. A Job
    /// deleted and made again under its name at once may get no pod for the Job
    /// controller's five minutes of stale expectations (kubernetes#131917), and a move
    /// retried after it was killed deletes the earlier try's Jobs just before.
    pub fn attempt(uid: &str, attempt: &str) -> Names {
        Names {
            attempt: attempt.to_owned(),
            ..Names::new(uid)
        }
    }

    /// A Job's name (`role`: `receive` or `send`), with the try's mark.
    pub fn job(&self, role: &str) -> String {
        if self.attempt.is_empty() {
            format!("{}-{role}", self.base)
        } else {
            format!("{}-{role}-{}", self.base, self.attempt)
        }
    }

    /// A try's mark from a number (e.g. the clock's nanoseconds): 5 base-36 digits, a valid
    /// name part.
    pub fn attempt_mark(n: u128) -> String {
        const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut n = n % 36u128.pow(5);
        let mut out = [b'0'; 5];
        for d in out.iter_mut().rev() {
            *d = DIGITS[(n % 36) as usize];
            n /= 36;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The labels of every object of the move.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(MOVE_OF.to_owned(), self.uid.clone())])
    }

    /// The selector of every object of the move.
    pub fn selector(&self) -> String {
        format!("{MOVE_OF}={}", self.uid)
    }
}

/// The image the Jobs run (the controller-manager's, which holds `liqo-mover`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Its reference.
    pub name: String,
    /// Its pull policy (the controller-manager's).
    pub pull_policy: Option<String>,
}

mod objects;
#[cfg(test)]
mod tests;

pub use objects::{
    ForgeError, Manifest, manifest, rebound_claim, receiver_job, sender_job, service, temp_claim,
    token_secret,
};

/// The merge patch that reserves a volume for the claim `namespace/name` before that claim
/// exists (the PV controller binds the claim to it when it is made): the UID and resource
/// version of the claim it had are cleared.
pub fn reserve_patch(namespace: &str, name: &str) -> serde_json::Value {
    serde_json::json!({"spec": {"claimRef": {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
        "name": name, "uid": null, "resourceVersion": null}}})
}

/// Whether `volume` is reserved for the claim `namespace/name`: its claim reference names it
/// without a UID (one with a UID is an earlier claim of that name).
pub fn reserved_for(volume: &PersistentVolume, namespace: &str, name: &str) -> bool {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| {
            r.namespace.as_deref() == Some(namespace)
                && r.name.as_deref() == Some(name)
                && r.uid.as_deref().is_none_or(str::is_empty)
        })
}

/// What a `move volume` of a claim does about a volume an earlier move of it kept (`kept`:
/// the verified copy, `Retain`, [`MOVED_CLAIM`] and [`MOVED_FROM_UID`] set), given the claim
/// of that name now (`claim`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// No earlier move to finish: a move starts.
    Start,
    /// No such claim, no kept copy.
    NotFound,
    /// The original is gone, or the claim is bound to the copy already: finish the switch.
    Finish,
    /// The original is being deleted (by the switch): wait until it is gone, then finish.
    WaitThenFinish,
    /// The original is still there (killed before it was deleted): it is what counts (it may
    /// have changed since); the copy is discarded and a move starts again.
    Discard,
    /// Another claim of that name (not the original, not bound to the copy): nothing is
    /// touched; the copy stays kept. Why, naming both.
    Conflict(String),
}

/// The decision [`Resume`] describes.
pub fn resume(claim: Option<&PersistentVolumeClaim>, kept: Option<&PersistentVolume>) -> Resume {
    let (claim, kept) = match (claim, kept) {
        (None, None) => return Resume::NotFound,
        (None, Some(_)) => return Resume::Finish,
        (Some(_), None) => return Resume::Start,
        (Some(c), Some(v)) => (c, v),
    };
    let volume = kept.metadata.name.as_deref().unwrap_or_default();
    if claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(volume) {
        return Resume::Finish;
    }
    let from = kept
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MOVED_FROM_UID))
        .map(String::as_str);
    let uid = claim.metadata.uid.as_deref();
    match (from, uid) {
        (Some(f), Some(u)) if f == u && claim.metadata.deletion_timestamp.is_some() => {
            Resume::WaitThenFinish
        }
        (Some(f), Some(u)) if f == u => Resume::Discard,
        _ => Resume::Conflict(format!(
            "claim {} (UID {}) is not the claim whose data volume {volume} holds (UID {}): the \
             verified copy stays in {volume} (Retain); delete claim {} (or give it another \
             name), then run move volume again to bind the copy to a claim of that name",
            id(claim),
            uid.unwrap_or("?"),
            from.unwrap_or("?"),
            id(claim),
        )),
    }
}

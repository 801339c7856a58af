//! The static volume a twin claim is pre-bound to when its class has no provisioner
//! (`kubernetes.io/no-provisioner`: local or other volumes an operator made in advance). The
//! PV controller never binds a claim of a `WaitForFirstConsumer` class itself, and a twin
//! claim has no pod for the scheduler's volume binder to bind it: so the provisioner does what
//! that binder would on the twin's selected node (it writes the volume's claim reference) and
//! the PV controller completes the binding.
//!
//! A volume fits ([`pick`]) when it is not being deleted, is claimed by no one (no claim
//! reference), is `Available` (or has no status yet), is of the twin's class (none: `""`, as
//! Kubernetes compares them), holds at least the twin's request, offers every access mode the
//! twin asks, has the twin's volume mode (`Filesystem` when unset) and its required node
//! affinity matches the node, by labels and name (no affinity matches every node; one that is
//! not a valid selector matches none). Of those, the smallest; equal sizes by name.
//!
//! Pure: the caller lists the volumes, gets the node and class, and writes the reference.

use std::{cmp::Reverse, collections::BTreeMap};

use k8s_openapi::{
    api::{
        core::v1::{Node, ObjectReference, PersistentVolume, PersistentVolumeClaim},
        storage::v1::StorageClass,
    },
    apimachinery::pkg::api::resource::Quantity,
};
use serde_json::{Value, json};

use super::{StorageError, describe, forge, provision::Action};
use crate::{consts::annotations::DEFAULT_STORAGE_CLASS, quantity::Amount, selector};

/// The provisioner of a class whose volumes are made in advance (nothing provisions them).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The beta spelling of the default class's annotation (still honoured by Kubernetes).
pub const BETA_DEFAULT_STORAGE_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// On a volume: its claim reference was written by a binder, not by a user (the PV controller
/// removes such a reference if the claim gets bound to another volume; a user's it keeps).
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// The volume mode of a claim or volume that names none.
const FILESYSTEM: &str = "Filesystem";

/// Whether `class` has no provisioner (its volumes are made in advance).
pub fn is_static(class: &StorageClass) -> bool {
    class.provisioner == NO_PROVISIONER
}

/// The cluster's default class, as Kubernetes picks it: of the classes annotated
/// `storageclass.kubernetes.io/is-default-class=true` (or the beta spelling), the newest;
/// equal creation times by name.
pub fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            let a = c.metadata.annotations.as_ref();
            [DEFAULT_STORAGE_CLASS, BETA_DEFAULT_STORAGE_CLASS]
                .iter()
                .any(|k| a.and_then(|a| a.get(*k)).map(String::as_str) == Some("true"))
        })
        .max_by_key(|c| {
            (
                c.metadata.creation_timestamp.clone(),
                Reverse(c.metadata.name.clone()),
            )
        })
}

/// What a twin claim asks of a volume.
struct Need<'a> {
    class: &'a str,
    size: Amount,
    text: Quantity,
    modes: &'a [String],
    mode: &'a str,
}

fn need(twin: &PersistentVolumeClaim) -> Result<Need<'_>, StorageError> {
    let text = forge::requested(twin)?;
    let size = Amount::from_quantity(&text).map_err(|source| StorageError::Quantity {
        object: describe("PersistentVolumeClaim", &twin.metadata),
        field: "spec.resources.requests.storage",
        source,
    })?;
    let spec = twin.spec.as_ref();
    Ok(Need {
        class: spec
            .and_then(|s| s.storage_class_name.as_deref())
            .unwrap_or_default(),
        size,
        text,
        modes: spec
            .and_then(|s| s.access_modes.as_deref())
            .unwrap_or_default(),
        mode: spec
            .and_then(|s| s.volume_mode.as_deref())
            .unwrap_or(FILESYSTEM),
    })
}

/// The size of `v` if it fits `need` on `node`.
fn fits(need: &Need<'_>, v: &PersistentVolume, node: &Node) -> Option<Amount> {
    if v.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let spec = v.spec.as_ref()?;
    let phase = v.status.as_ref().and_then(|s| s.phase.as_deref());
    if spec.claim_ref.is_some() || phase.is_some_and(|p| p != "Available") {
        return None;
    }
    if spec.storage_class_name.as_deref().unwrap_or_default() != need.class
        || spec.volume_mode.as_deref().unwrap_or(FILESYSTEM) != need.mode
    {
        return None;
    }
    let offered = spec.access_modes.as_deref().unwrap_or_default();
    if !need.modes.iter().all(|m| offered.contains(m)) {
        return None;
    }
    let size = Amount::from_quantity(spec.capacity.as_ref()?.get("storage")?).ok()?;
    if size < need.size {
        return None;
    }
    let required = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref());
    let no_labels = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&no_labels);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    selector::selector_matches(required, labels, name)
        .unwrap_or(false)
        .then_some(size)
}

fn best<'a>(
    need: &Need<'_>,
    volumes: &'a [PersistentVolume],
    node: &Node,
) -> Option<&'a PersistentVolume> {
    volumes
        .iter()
        .filter_map(|v| Some((fits(need, v, node)?, v)))
        .min_by(|(a, v), (b, w)| (a, &v.metadata.name).cmp(&(b, &w.metadata.name)))
        .map(|(_, v)| v)
}

/// The volume of `volumes` that `twin` is to be pre-bound to on `node`: the smallest that fits
/// (see the module's documentation), equal sizes by name. `None` when none fits, or when the
/// twin has no size that parses.
pub fn pick<'a>(
    twin: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    node: &Node,
) -> Option<&'a PersistentVolume> {
    best(&need(twin).ok()?, volumes, node)
}

/// Whether `v` (not being deleted) names `twin` in its claim reference (a reference without
/// a UID names any claim of that namespace and name, as Kubernetes reads one).
fn pre_bound(v: &PersistentVolume, twin: &PersistentVolumeClaim) -> bool {
    let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    v.metadata.deletion_timestamp.is_none()
        && r.namespace == twin.metadata.namespace
        && r.name == twin.metadata.name
        && (r.uid.is_none() || r.uid == twin.metadata.uid)
}

/// What to do about `twin` (the provisioner's own, not bound, not being deleted), of a class
/// without a provisioner whose volumes are `volumes`, selected on `node`: nothing while a
/// volume names it already (the PV controller completes that binding), else pre-bind
/// [`pick`]'s volume, else refuse, naming the class, the node and what the twin needs.
pub(super) fn decide(
    twin: &PersistentVolumeClaim,
    volumes: &[PersistentVolume],
    node: &Node,
) -> Result<Action, StorageError> {
    if volumes.iter().any(|v| pre_bound(v, twin)) {
        return Ok(Action::Nothing(
            "a static volume is pre-bound to its twin claim (the PV controller binds them)",
        ));
    }
    let need = need(twin)?;
    let Some(v) = best(&need, volumes, node) else {
        let mut needs = vec![need.text.0.clone()];
        needs.extend(need.modes.iter().cloned());
        if need.mode != FILESYSTEM {
            needs.push(need.mode.to_owned());
        }
        return Ok(Action::Refuse(format!(
            "not provisioned: no static volume of class {} fits on node {} (needs {})",
            if need.class.is_empty() {
                "\"\""
            } else {
                need.class
            },
            node.metadata.name.as_deref().unwrap_or_default(),
            needs.join(", ")
        )));
    };
    let missing = |field| StorageError::Missing {
        object: describe("PersistentVolume", &v.metadata),
        field,
    };
    Ok(Action::PreBind {
        volume: v.metadata.name.clone().ok_or(missing("metadata.name"))?,
        resource_version: v
            .metadata
            .resource_version
            .clone()
            .ok_or(missing("metadata.resourceVersion"))?,
        claim_ref: forge::reference(twin)?,
    })
}

/// The JSON merge patch that pre-binds a volume: its claim reference `claim_ref`, marked as a
/// binder's (see [`BOUND_BY_CONTROLLER`]), at `resource_version` (the API server refuses it
/// with a conflict if the volume changed since it was read: another binder may have taken it).
pub fn pre_bind_patch(resource_version: &str, claim_ref: &ObjectReference) -> Value {
    json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": {BOUND_BY_CONTROLLER: "yes"},
        },
        "spec": {"claimRef": claim_ref},
    })
}

#[cfg(test)]
mod tests;

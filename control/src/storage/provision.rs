//! The provisioner's decision for one claim of class `liqo` (the external-provisioner
//! contract: a volume `pvc-<uid>` bound to the claim, which the PV controller completes).
//!
//! - No node selected yet: wait (the class binds at the first consumer).
//! - Selected node virtual: the placeholder volume pinned to it (the provider's copy of the
//!   claim is the virtual kubelet's).
//! - Selected node physical: the twin claim in `liqo-storage`; once it is bound, the virtual
//!   volume mirroring its volume. While it is not, and its class has no provisioner, a static
//!   volume pre-bound to it ([`static_bind`]), or, when none fits, refused with the reason.
//! - Selected node gone: the selection is undone (the scheduler selects again), with an Event.
//! - The twin's name taken by a claim that is not the twin: refused, with the reason (an Event
//!   on the claim); nothing is made.

use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolume, PersistentVolumeClaim};

use super::{StorageError, asked_provisioner, forge, is_virtual, selected_node, static_bind};
use crate::consts::storage as consts;

/// What the selected node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A node of this cluster.
    Physical,
    /// A virtual node (`liqo.io/type=virtual-node`): a provider.
    Virtual,
    /// No such node.
    Missing,
}

impl NodeKind {
    /// What `node` (absent: none of that name) is.
    pub fn of(node: Option<&k8s_openapi::api::core::v1::Node>) -> NodeKind {
        use crate::consts::{labels, values};
        match node {
            None => NodeKind::Missing,
            Some(n)
                if n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::NODE_TYPE))
                    .map(String::as_str)
                    == Some(values::VIRTUAL_NODE) =>
            {
                NodeKind::Virtual
            }
            Some(_) => NodeKind::Physical,
        }
    }
}

/// The provisioner's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where twin claims live (`liqo-storage`).
    pub namespace: String,
    /// The twin claims' class (`storage.realStorageClassName`); none: the default class.
    pub real_class: Option<String>,
    /// The reclaim policy of the volumes made (the `liqo` class's).
    pub reclaim: String,
}

/// What the provisioner sees of one claim.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The claim.
    pub claim: &'a PersistentVolumeClaim,
    /// What its selected node is (when one is selected).
    pub node: NodeKind,
    /// The selected node, if it exists (a static volume's node affinity is matched against
    /// it).
    pub selected: Option<&'a Node>,
    /// The volume `pvc-<uid>`, if it exists.
    pub volume: Option<&'a PersistentVolume>,
    /// The claim named after its UID in the twin namespace, if it exists.
    pub twin: Option<&'a PersistentVolumeClaim>,
    /// The volume the twin is bound to, if it is.
    pub twin_volume: Option<&'a PersistentVolume>,
    /// Every volume, when the twin exists unbound and its class (none named: the default
    /// class) has no provisioner (`kubernetes.io/no-provisioner`); `None` otherwise (the
    /// class's provisioner binds it).
    pub static_volumes: Option<&'a [PersistentVolume]>,
    /// The settings.
    pub settings: &'a Settings,
}

/// One thing to do about a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing now (why, for the log): not ours, bound, or waiting for an event.
    Nothing(&'static str),
    /// Create the twin claim.
    CreateTwin(Box<PersistentVolumeClaim>),
    /// Create the claim's volume.
    CreateVolume(Box<PersistentVolume>),
    /// Pre-bind a static volume to the twin claim (the scheduler's volume binder's part: the
    /// PV controller completes the binding): its claim reference set, if it is still at
    /// `resource_version` ([`static_bind::pre_bind_patch`]).
    PreBind {
        /// The volume's name.
        volume: String,
        /// The volume's resource version as read (a conflict if it changed).
        resource_version: String,
        /// The twin claim's reference (API version, kind, namespace, name, UID).
        claim_ref: ObjectReference,
    },
    /// Refused: a Warning Event on the claim says why; nothing is made.
    Refuse(String),
    /// The selected node is gone: remove the claim's selected-node annotation (the scheduler
    /// selects again, as with any external provisioner) and say why in a Warning Event.
    Unselect(String),
}

/// What to do about `o.claim`.
pub fn decide(o: &Observed<'_>) -> Result<Action, StorageError> {
    let claim = o.claim;
    if !is_virtual(claim) {
        return Ok(Action::Nothing("not of class liqo"));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Ok(Action::Nothing("being deleted"));
    }
    if claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty())
    {
        return Ok(Action::Nothing("bound"));
    }
    if o.volume.is_some() {
        return Ok(Action::Nothing(
            "its volume exists (the PV controller binds it)",
        ));
    }
    if asked_provisioner(claim).is_some_and(|p| p != consts::PROVISIONER) {
        return Ok(Action::Nothing("another provisioner was asked"));
    }
    let Some(node) = selected_node(claim) else {
        return Ok(Action::Nothing("no node selected yet (first consumer)"));
    };
    match o.node {
        NodeKind::Missing => Ok(Action::Unselect(format!(
            "not provisioned: the selected node {node:?} does not exist; the scheduler selects \
             another"
        ))),
        NodeKind::Virtual => Ok(Action::CreateVolume(Box::new(forge::placeholder_volume(
            claim,
            node,
            &o.settings.reclaim,
        )?))),
        NodeKind::Physical => physical(o, node),
    }
}

fn physical(o: &Observed<'_>, node: &str) -> Result<Action, StorageError> {
    let claim = o.claim;
    let (ns, name) = (
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default(),
    );
    let Some(twin) = o.twin else {
        return Ok(Action::CreateTwin(Box::new(forge::twin_claim(
            claim,
            node,
            o.settings.real_class.as_deref(),
            &o.settings.namespace,
        )?)));
    };
    if !forge::is_twin_of(twin, ns, name) {
        return Ok(Action::Refuse(format!(
            "not provisioned: {}/{} exists and is not the twin of this claim",
            o.settings.namespace,
            twin.metadata.name.as_deref().unwrap_or_default()
        )));
    }
    if twin.metadata.deletion_timestamp.is_some() {
        return Ok(Action::Nothing("its twin claim is being deleted"));
    }
    let bound = twin.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if let (true, Some(real)) = (bound, o.twin_volume) {
        return Ok(Action::CreateVolume(Box::new(forge::virtual_volume(
            claim,
            real,
            &o.settings.reclaim,
        )?)));
    }
    // A volume named in the twin already: the PV controller finishes the binding.
    let named = twin
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    match (named, o.static_volumes, o.selected) {
        (false, Some(volumes), Some(node)) => static_bind::decide(twin, volumes, node),
        _ => Ok(Action::Nothing("its twin claim is not bound yet")),
    }
}

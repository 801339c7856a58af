//! The storage fabric (§6 of the control-plane spec; the manual's §20.1): what becomes of a
//! claim of the virtual StorageClass `liqo` once its first consumer is scheduled.
//!
//! - [`forge`]: the objects made whole from their inputs: a twin (real) claim in
//!   `liqo-storage` for a claim bound on a physical node, the virtual volume mirroring the
//!   twin's volume with the data-gravity affinity, the placeholder volume of a claim bound on
//!   a virtual node (pinned to it), and the provider's copy of such a claim;
//! - [`provision`]: the provisioner's decision for one virtual claim (make the twin claim,
//!   pre-bind a static volume to it, make the volume, wait, or refuse with a reason);
//! - [`static_bind`]: the static volume a twin claim of a class without a provisioner
//!   (`kubernetes.io/no-provisioner`) is pre-bound to, chosen as the scheduler's volume binder
//!   chooses (the twin has no pod: nothing else would bind it);
//! - [`reclaim`]: the decision for one volume of ours whose claim is gone (the twin claim
//!   first, then the volume; never with `Retain`);
//! - [`moving`]: `liqoctl move volume`'s refusals, the objects a move makes and the claim
//!   re-bound to the moved data.
//!
//! Pure: it reads no API server and no clock. It never decides which namespaces are offloaded
//! and never deletes anything whose claim still exists: a volume's data goes only with the
//! claim someone deleted by name.

pub mod forge;
pub mod moving;
pub mod provision;
pub mod reclaim;
pub mod static_bind;

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::{consts::storage as consts, quantity::InvalidQuantity};

/// Why an object could not be forged (fields the API server always sets, or a claim without
/// a size, or with a size that is not a quantity).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// A field the object must have is missing.
    #[error("{object} has no {field}")]
    Missing {
        /// The object, as `kind namespace/name`.
        object: String,
        /// The missing field's path.
        field: &'static str,
    },
    /// A size that does not parse as a quantity (the API server validates them: never from
    /// it).
    #[error("{object} has a bad {field}")]
    Quantity {
        /// The object, as `kind namespace/name`.
        object: String,
        /// The field's path.
        field: &'static str,
        /// The parser's refusal.
        #[source]
        source: InvalidQuantity,
    },
}

/// Whether `claim` asks for the virtual StorageClass.
pub fn is_virtual(claim: &PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        == Some(consts::CLASS)
}

/// The node the scheduler selected for `claim`'s first consumer, if any.
pub fn selected_node(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(consts::SELECTED_NODE)
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// The provisioner the PV controller asked for `claim`, if it did.
pub fn asked_provisioner(claim: &PersistentVolumeClaim) -> Option<&str> {
    let a = claim.metadata.annotations.as_ref()?;
    a.get(consts::STORAGE_PROVISIONER)
        .or_else(|| a.get(consts::BETA_STORAGE_PROVISIONER))
        .map(String::as_str)
}

/// `kind namespace/name` of an object, for errors and Events.
pub(crate) fn describe(
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> String {
    match &meta.namespace {
        Some(ns) => format!("{kind} {ns}/{}", meta.name.as_deref().unwrap_or("?")),
        None => format!("{kind} {}", meta.name.as_deref().unwrap_or("?")),
    }
}

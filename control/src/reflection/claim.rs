//! PersistentVolumeClaims of class `liqo` bound on this virtual node (the storage fabric's
//! remote binding, manual §19.3 and §20.1.2): copied to the provider under the same name with
//! the class the offer names as its default (none: the provider's default), the size, access
//! modes and volume mode asked; Kubernetes' binding annotations stay home. Every other claim
//! is not this reflector's: one of another class has no copy; one of class `liqo` bound
//! elsewhere (a physical node, another virtual node) or not bound yet waits, and a copy made
//! earlier is never deleted for it (its data stays until the local claim is deleted: from the
//! moment it is marked for deletion, its pods still holding it).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use liqo_types::FieldError;

use super::{Ctx, Inputs, Kind, Reflect, Skip, meta};
use crate::storage::{self, forge};

impl Reflect for PersistentVolumeClaim {
    const KIND: Kind = Kind::PersistentVolumeClaim;

    /// Opted out (`liqo.io/skip-reflection`), or labelled as a copy: an existing copy stays
    /// (its data goes only with its claim, deleted by name).
    fn keeps_excluded_copy(local: &Self) -> bool {
        local.metadata.deletion_timestamp.is_none()
    }

    fn skip(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Option<Skip> {
        if !storage::is_virtual(local) {
            return Some(Skip::Excluded("not of class liqo"));
        }
        if local.metadata.deletion_timestamp.is_some() {
            // Deleted by name (it waits for its pods): its copy goes too, and the provider
            // may let the namespace go (a copy being deleted holds no data it keeps).
            return Some(Skip::Excluded("being deleted"));
        }
        if storage::selected_node(local) != Some(ctx.node) {
            // Wait, not Excluded: a copy is deleted only with its local claim.
            return Some(Skip::Wait("not bound on this virtual node"));
        }
        None
    }

    fn forge(local: &Self, ctx: &Ctx<'_>, inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        let mut m = local.metadata.clone();
        if let Some(a) = m.annotations.as_mut() {
            a.retain(|k, _| !forge::is_binding_annotation(k));
        }
        let spec = local.spec.clone().unwrap_or_default();
        Ok(PersistentVolumeClaim {
            metadata: meta::remote(&m, name, ctx, []),
            spec: Some(forge::remote_claim_spec(
                &spec,
                inputs.storage_class.as_deref(),
            )),
            status: None,
        })
    }
}

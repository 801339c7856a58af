//! The provisioner's I/O for twin claims of a class without a provisioner
//! (`kubernetes.io/no-provisioner`), `control::storage::static_bind` deciding: it reads the
//! twin's class, every volume, and writes one volume's claim reference (the scheduler's volume
//! binder's part; the PV controller completes the binding, and the twin's update is the
//! provisioner's event through its twin watch).

use control::storage::static_bind;
use k8s_openapi::api::{
    core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim},
    storage::v1::StorageClass,
};
use kube::{
    Api,
    api::{ListParams, Patch},
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::merge_params,
};

/// Whether the class of `twin` has no provisioner: the class it names, or, when it names none,
/// the cluster's default class (a twin of class `""` asks for no class: not static). A class
/// that does not exist is not static (nothing to pick from; the PV controller says so on the
/// twin).
async fn is_static(ctx: &Context, twin: &PersistentVolumeClaim) -> Result<bool, Error> {
    let api = Api::<StorageClass>::all(ctx.client.clone());
    let class = match twin
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
    {
        Some("") => None,
        Some(name) => api
            .get_opt(name)
            .await
            .map_err(kerr(format!("get StorageClass {name}")))?,
        None => {
            let classes = api
                .list(&ListParams::default())
                .await
                .map_err(kerr("list StorageClasses"))?
                .items;
            static_bind::default_class(&classes).cloned()
        }
    };
    Ok(class.is_some_and(|c| static_bind::is_static(&c)))
}

/// Every volume, when `twin` (if any) is not bound to one, not being deleted, and of a class
/// without a provisioner; `None` otherwise (nothing to pre-bind).
pub(super) async fn volumes(
    ctx: &Context,
    twin: Option<&PersistentVolumeClaim>,
) -> Result<Option<Vec<PersistentVolume>>, Error> {
    let Some(twin) = twin else { return Ok(None) };
    let named = twin
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    if named || twin.metadata.deletion_timestamp.is_some() || !is_static(ctx, twin).await? {
        return Ok(None);
    }
    let volumes = Api::<PersistentVolume>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kerr("list PersistentVolumes"))?;
    Ok(Some(volumes.items))
}

/// Pre-binds `volume` to the twin claim `claim_ref` with a JSON merge patch carrying the
/// volume's `resource_version` (a volume changed since it was read is a conflict, an error:
/// the error policy retries the reconcile, which picks again).
pub(super) async fn pre_bind(
    ctx: &Context,
    volume: &str,
    resource_version: &str,
    claim_ref: &ObjectReference,
) -> Result<(), Error> {
    let patch = static_bind::pre_bind_patch(resource_version, claim_ref);
    Api::<PersistentVolume>::all(ctx.client.clone())
        .patch(volume, &merge_params(), &Patch::Merge(&patch))
        .await
        .map_err(kerr(format!(
            "pre-bind PersistentVolume {volume} at resourceVersion {resource_version}"
        )))?;
    Ok(())
}

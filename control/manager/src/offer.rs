//! The ResourceOffer controller's I/O on a consumer (§1.2 step 8): for each copy of a
//! provider's offer, accepts it, runs its virtual kubelet through the [`Launcher`]
//! (finalizer `liqo.io/virtualkubelet`), records `virtualKubeletStatus`.
//!
//! [`Launcher`]: crate::launcher::Launcher

use std::sync::Arc;

use control::{
    api::sharing::ResourceOffer,
    consts::{finalizers, labels},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::{apply_status, controller_ref, set_finalizers},
    launcher::Peer,
};
use control::peering::offer::{self as decide, Action, Observed};

/// The controller's name in metrics and logs.
pub const NAME: &str = "resourceoffer";

/// One reconcile of an offer copy (`liqo.io/replicated=true`).
pub async fn reconcile(ro: Arc<ResourceOffer>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let ns = ro.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = ro.name_any();
    let api: Api<ResourceOffer> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = ro.meta().deletion_timestamp.is_some();
    let status = ro.status.clone().unwrap_or_default();
    let origin = ro.labels().get(labels::ORIGIN_ID).map(String::as_str);
    if !crate::kit::trusted(
        &ctx,
        "ResourceOffer",
        &ro.metadata,
        &ns,
        origin,
        &ro.spec.cluster_id,
    )
    .await?
    {
        return Ok(Requeue::await_change());
    }
    let has_finalizer = ro
        .finalizers()
        .iter()
        .any(|f| f == finalizers::VIRTUAL_KUBELET);
    if !deleting
        && !ro
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true))
    {
        let fc = crate::kit::foreign_cluster(&ctx, &ro.spec.cluster_id).await?;
        if let Some(owner) = fc.as_ref().and_then(controller_ref) {
            let patch = json!({"metadata": {"ownerReferences": [owner]}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(kerr(format!("owner of ResourceOffer {ns}/{name}")))?;
        }
    }
    let observed = Observed {
        phase: status.phase,
        virtual_kubelet: status.virtual_kubelet_status,
        has_finalizer,
        withdrawn: deleting || ro.spec.withdrawal_timestamp.is_some(),
    };
    let peer = Peer {
        cluster_id: ro.spec.cluster_id.clone(),
        namespace: ns.clone(),
        offer: name.clone(),
    };
    let others = || -> Vec<String> {
        ro.finalizers()
            .iter()
            .filter(|f| *f != finalizers::VIRTUAL_KUBELET)
            .cloned()
            .collect()
    };
    for action in decide::decide(&observed) {
        match action {
            Action::AddFinalizer => {
                let mut list = others();
                list.push(finalizers::VIRTUAL_KUBELET.into());
                set_finalizers(&api, &name, ro.resource_version().as_deref(), list).await?;
            }
            Action::RemoveFinalizer => {
                set_finalizers(&api, &name, ro.resource_version().as_deref(), others()).await?;
            }
            Action::Start => ctx
                .launcher
                .start(&peer)
                .await
                .map_err(|e| Error::Launcher(Box::new(e)))?,
            Action::Stop => ctx
                .launcher
                .stop(&peer)
                .await
                .map_err(|e| Error::Launcher(Box::new(e)))?,
            Action::Status(phase, vk) => {
                if deleting {
                    continue;
                }
                let value = json!({"phase": phase, "virtualKubeletStatus": vk});
                apply_status(&api, &name, &value).await?;
            }
        }
    }
    Ok(Requeue::requeue(ctx.settings.resync))
}

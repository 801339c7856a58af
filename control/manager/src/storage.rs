//! The storage fabric's provisioner (§6 of the control-plane spec) in the controller-manager,
//! our own external-provisioner loop (no sidecar): [`provision`] over the claims of class
//! `liqo` (twin claims, volumes; a twin's events queue its claim; a twin of a class without a
//! provisioner pre-bound to a static volume, [`static_bind`]), [`reclaim_volume`] over the
//! volumes we provisioned (a released one goes after its twin claim, found by the volume's
//! name), and [`orphan_twin`] over the twin claims (one whose claim was deleted before its
//! volume was made goes too). The decisions are `control::storage`'s; this module reads,
//! creates, patches and deletes.
//!
//! It creates the twin claims' namespace when it first needs it (the chart does not own it:
//! it holds data). It never copies a claim to a provider (the virtual kubelet does), never
//! deletes a claim it did not make, never deletes the namespace, and never deletes anything
//! while the claim it backs exists.

mod static_bind;

use std::{sync::Arc, time::Duration};

use control::{
    consts::storage as consts,
    storage::{
        self, forge,
        provision::{self as decide, Action, NodeKind, Observed, Settings},
        reclaim,
    },
};
use futures::{FutureExt, StreamExt, future::BoxFuture};
use k8s_openapi::api::{
    core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim},
    storage::v1::StorageClass,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PostParams},
    runtime::{
        Controller, controller::Action as Requeue, controller::Config as ControllerConfig,
        reflector::ObjectRef, watcher,
    },
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    inflight::InFlight,
    kit::{event, log, not_found, policy, tracked},
};

/// The provisioner's name in metrics and logs.
pub const NAME: &str = "storage-provisioner";
/// The reclaimer's name in metrics and logs.
pub const RECLAIM: &str = "storage-reclaim";
/// The twin claims' controller's name in metrics and logs.
pub const ORPHANS: &str = "storage-twins";
/// Event reason: a claim of class `liqo` that cannot be provisioned as it is.
pub const REASON_REFUSED: &str = "ProvisioningRefused";
/// Event reason: a claim's selected node is gone; the selection is undone.
pub const REASON_UNSELECTED: &str = "SelectedNodeGone";
/// Event reason: a claim provisioned.
pub const REASON_PROVISIONED: &str = "Provisioned";

/// The storage controllers, when the fabric is on (`--enable-storage`).
pub fn controllers(
    ctx: &Arc<Context>,
    shutdown: impl futures::Future<Output = ()> + Send + Sync + Clone + 'static,
    inflight: &InFlight,
    config: &ControllerConfig,
) -> Vec<BoxFuture<'static, ()>> {
    let Some(s) = &ctx.settings.storage else {
        return Vec::new();
    };
    let client = &ctx.client;
    let provisioner = Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    // A twin claim's events (bound, deleted) concern its virtual claim.
    .watches(
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), &s.namespace),
        watcher::Config::default().labels(consts::VIRTUAL_PVC_NAMESPACE),
        |twin| {
            let (ns, name) = forge::named_claim(&twin.metadata)?;
            Some(ObjectRef::new(name).within(ns))
        },
    )
    .with_config(config.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(NAME, inflight, provision),
        policy::<PersistentVolumeClaim>(NAME),
        ctx.clone(),
    )
    .for_each(log(NAME))
    .boxed();
    let reclaimer = Controller::new(
        Api::<PersistentVolume>::all(client.clone()),
        watcher::Config::default().labels(consts::VIRTUAL_PVC_NAMESPACE),
    )
    .with_config(config.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(RECLAIM, inflight, reclaim_volume),
        policy::<PersistentVolume>(RECLAIM),
        ctx.clone(),
    )
    .for_each(log(RECLAIM))
    .boxed();
    let orphans = Controller::new(
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), &s.namespace),
        watcher::Config::default().labels(consts::VIRTUAL_PVC_NAMESPACE),
    )
    .with_config(config.clone())
    .graceful_shutdown_on(shutdown)
    .run(
        tracked(ORPHANS, inflight, orphan_twin),
        policy::<PersistentVolumeClaim>(ORPHANS),
        ctx.clone(),
    )
    .for_each(log(ORPHANS))
    .boxed();
    vec![provisioner, reclaimer, orphans]
}

/// What the selected node is, and the node if it exists.
async fn node_kind(ctx: &Context, name: &str) -> Result<(NodeKind, Option<Node>), Error> {
    let node = Api::<Node>::all(ctx.client.clone())
        .get_opt(name)
        .await
        .map_err(kerr(format!("get Node {name}")))?;
    let kind = NodeKind::of(node.as_ref());
    Ok((kind, node))
}

/// The `liqo` class's reclaim policy (`Delete` when it says none).
async fn reclaim_policy(ctx: &Context) -> Result<String, Error> {
    let class = Api::<StorageClass>::all(ctx.client.clone())
        .get_opt(consts::CLASS)
        .await
        .map_err(kerr(format!("get StorageClass {}", consts::CLASS)))?;
    Ok(class
        .and_then(|c| c.reclaim_policy)
        .unwrap_or_else(|| "Delete".to_owned()))
}

/// One reconcile of a claim.
pub async fn provision(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Context>,
) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let Some(s) = &ctx.settings.storage else {
        return Ok(Requeue::await_change());
    };
    let bound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    if !storage::is_virtual(&claim) || bound || claim.metadata.deletion_timestamp.is_some() {
        return Ok(Requeue::await_change());
    }
    let Some(node) = storage::selected_node(&claim) else {
        return Ok(Requeue::await_change());
    };
    let uid = claim.uid().ok_or(Error::Incomplete("claim UID"))?;
    let volumes = Api::<PersistentVolume>::all(ctx.client.clone());
    let twins = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &s.namespace);
    let volume_name = forge::volume_name(&uid);
    let volume = volumes
        .get_opt(&volume_name)
        .await
        .map_err(kerr(format!("get PersistentVolume {volume_name}")))?;
    let (kind, selected) = node_kind(&ctx, node).await?;
    let twin = match kind {
        NodeKind::Physical => twins.get_opt(&uid).await.map_err(kerr(format!(
            "get PersistentVolumeClaim {}/{uid}",
            s.namespace
        )))?,
        _ => None,
    };
    let twin_volume = match twin
        .as_ref()
        .and_then(|t| t.spec.as_ref()?.volume_name.clone())
    {
        Some(v) if !v.is_empty() => volumes
            .get_opt(&v)
            .await
            .map_err(kerr(format!("get PersistentVolume {v}")))?,
        _ => None,
    };
    let static_volumes = static_bind::volumes(&ctx, twin.as_ref()).await?;
    let settings = Settings {
        reclaim: reclaim_policy(&ctx).await?,
        ..s.clone()
    };
    let observed = Observed {
        claim: &claim,
        node: kind,
        selected: selected.as_ref(),
        volume: volume.as_ref(),
        twin: twin.as_ref(),
        twin_volume: twin_volume.as_ref(),
        static_volumes: static_volumes.as_deref(),
        settings: &settings,
    };
    let action = decide::decide(&observed).map_err(|e| Error::Storage(Box::new(e)))?;
    let who = format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    );
    match action {
        Action::Nothing(why) => {
            tracing::debug!(claim = %who, why, "nothing to do");
            Ok(Requeue::requeue(ctx.settings.resync))
        }
        Action::CreateTwin(t) => {
            ensure_namespace(&ctx, &s.namespace).await?;
            create(&twins, &t, "PersistentVolumeClaim").await?;
            tracing::info!(claim = %who, twin = %format!("{}/{uid}", s.namespace), node, "twin claim created");
            Ok(Requeue::await_change())
        }
        Action::CreateVolume(v) => {
            create(&volumes, &v, "PersistentVolume").await?;
            let note = match kind {
                NodeKind::Virtual => format!(
                    "volume {volume_name} provisioned on virtual node {node}: the data lives on the provider (a copy of this claim there)"
                ),
                _ => format!(
                    "volume {volume_name} provisioned on node {node} (twin claim {}/{uid})",
                    s.namespace
                ),
            };
            tracing::info!(claim = %who, volume = %volume_name, node, "volume provisioned");
            event(
                &ctx,
                &claim.object_ref(&()),
                false,
                REASON_PROVISIONED,
                note,
            )
            .await;
            Ok(Requeue::await_change())
        }
        Action::PreBind {
            volume: static_volume,
            resource_version,
            claim_ref,
        } => {
            static_bind::pre_bind(&ctx, &static_volume, &resource_version, &claim_ref).await?;
            tracing::info!(claim = %who, twin = %format!("{}/{uid}", s.namespace), volume = %static_volume, node, "static volume pre-bound to the twin claim");
            // The PV controller's binding of the twin is the twin watch's event; the resync
            // only backs it up.
            Ok(Requeue::requeue(ctx.settings.resync))
        }
        Action::Refuse(note) => {
            tracing::warn!(claim = %who, %note, "not provisioned");
            event(&ctx, &claim.object_ref(&()), true, REASON_REFUSED, note).await;
            // Retried at the resync period (a static volume made since is picked then); not
            // sooner: each refusal is an Event.
            Ok(Requeue::requeue(ctx.settings.resync))
        }
        Action::Unselect(note) => {
            let patch =
                serde_json::json!({"metadata": {"annotations": {consts::SELECTED_NODE: null}}});
            Api::<PersistentVolumeClaim>::namespaced(
                ctx.client.clone(),
                &claim.namespace().unwrap_or_default(),
            )
            .patch(
                &claim.name_any(),
                &crate::kit::merge_params(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(kerr(format!("unselect the node of claim {who}")))?;
            tracing::warn!(claim = %who, %note, "selection undone");
            event(&ctx, &claim.object_ref(&()), true, REASON_UNSELECTED, note).await;
            Ok(Requeue::await_change())
        }
    }
}

/// Creates the twin claims' namespace if it is not there (not the chart's: neither an
/// uninstall nor a reinstall trips over it while it holds data).
async fn ensure_namespace(ctx: &Context, name: &str) -> Result<(), Error> {
    let api = Api::<Namespace>::all(ctx.client.clone());
    if api
        .get_opt(name)
        .await
        .map_err(kerr(format!("get Namespace {name}")))?
        .is_some()
    {
        return Ok(());
    }
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    create(&api, &ns, "Namespace").await?;
    tracing::info!(namespace = name, "the twin claims' namespace created");
    Ok(())
}

/// Creates `object`; one already there (a retry after a lost answer) is done.
async fn create<K>(api: &Api<K>, object: &K, kind: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(kerr(format!(
            "create {kind} {}",
            object.meta().name.as_deref().unwrap_or_default()
        ))(e)),
    }
}

/// One reconcile of a volume of ours.
pub async fn reclaim_volume(
    volume: Arc<PersistentVolume>,
    ctx: Arc<Context>,
) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(RECLAIM);
    let Some(s) = &ctx.settings.storage else {
        return Ok(Requeue::await_change());
    };
    if !forge::is_ours(&volume) {
        return Ok(Requeue::await_change());
    }
    // The twin by the volume's own name (`pvc-<twin>`), not by its claim's UID: a volume
    // moved to a new claim of the same name keeps its twin.
    let twins = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &s.namespace);
    let twin = match forge::twin_name_of(&volume) {
        Some(name) => twins.get_opt(name).await.map_err(kerr(format!(
            "get PersistentVolumeClaim {}/{name}",
            s.namespace
        )))?,
        None => None,
    };
    match reclaim::decide(&volume, twin.as_ref()) {
        reclaim::Action::Nothing(why) => {
            tracing::debug!(volume = %volume.name_any(), why, "nothing to reclaim");
            // A twin still going (pvc-protection, a finalizer): its deletion is not this
            // controller's event.
            if twin
                .as_ref()
                .is_some_and(|t| t.metadata.deletion_timestamp.is_some())
            {
                return Ok(Requeue::requeue(Duration::from_secs(2)));
            }
            Ok(Requeue::await_change())
        }
        reclaim::Action::DeleteTwin {
            namespace,
            name,
            uid,
        } => {
            twins
                .delete(&name, &control::requests::delete_by_uid(uid))
                .await
                .map(drop)
                .or_else(not_found)
                .map_err(kerr(format!(
                    "delete PersistentVolumeClaim {namespace}/{name}"
                )))?;
            tracing::info!(volume = %volume.name_any(), twin = %format!("{namespace}/{name}"), "released: twin claim deleted");
            // The volume goes once the twin is gone (polled: the twin's deletion is not this
            // controller's event).
            Ok(Requeue::requeue(Duration::from_secs(2)))
        }
        reclaim::Action::DeleteVolume { name, uid } => {
            Api::<PersistentVolume>::all(ctx.client.clone())
                .delete(&name, &control::requests::delete_by_uid(uid))
                .await
                .map(drop)
                .or_else(not_found)
                .map_err(kerr(format!("delete PersistentVolume {name}")))?;
            tracing::info!(volume = %name, "released: volume deleted");
            Ok(Requeue::await_change())
        }
    }
}

/// One reconcile of a twin claim: deleted when its claim is gone before its volume was made.
pub async fn orphan_twin(
    twin: Arc<PersistentVolumeClaim>,
    ctx: Arc<Context>,
) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(ORPHANS);
    let Some((ns, name)) = forge::named_claim(&twin.metadata) else {
        return Ok(Requeue::await_change());
    };
    let claim = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(kerr(format!("get PersistentVolumeClaim {ns}/{name}")))?;
    let volume_name = forge::volume_name(&twin.name_any());
    let volume = Api::<PersistentVolume>::all(ctx.client.clone())
        .get_opt(&volume_name)
        .await
        .map_err(kerr(format!("get PersistentVolume {volume_name}")))?;
    // With Retain the twin is kept whatever became of its volume (an operator may have
    // deleted the released volume: the data stays in the twin).
    let delete = reclaim_policy(&ctx).await? == "Delete";
    let Some(reclaim::Action::DeleteTwin {
        namespace,
        name: twin_name,
        uid,
    }) = reclaim::orphan(&twin, claim.as_ref(), volume.is_some() || !delete)
    else {
        return Ok(Requeue::requeue(ctx.settings.resync));
    };
    Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &namespace)
        .delete(&twin_name, &control::requests::delete_by_uid(uid))
        .await
        .map(drop)
        .or_else(not_found)
        .map_err(kerr(format!(
            "delete PersistentVolumeClaim {namespace}/{twin_name}"
        )))?;
    tracing::info!(twin = %format!("{namespace}/{twin_name}"), claim = %format!("{ns}/{name}"), "its claim is gone: twin claim deleted");
    Ok(Requeue::await_change())
}

//! The ShadowPod controller on a provider (§2.3, §2.4 of the control-plane spec; upstream
//! `shadowpod-controller`): for each ShadowPod (all namespaces) a Pod of the same name and
//! namespace, with the ShadowPod's labels plus `liqo.io/managed-by=shadowpod`, its
//! annotations, `spec = spec.pod`, and a controller reference to the ShadowPod
//! (blockOwnerDeletion: the garbage collector deletes the pod with it). The pod is created
//! when missing, again after it was deleted or evicted (it watches the pods it owns), also
//! while the consumer is unreachable: the ShadowPod is local.
//!
//! The spec is the consumer's, so what would reach past the namespace the provider gave it is
//! removed first (`control::shadowpod::provider::confine`: host namespaces, a node name, node
//! selection, scheduler and priority, the ServiceAccount token), with a Warning Event naming what
//! was removed.
//!
//! When a ShadowPod goes (deleted, or being deleted), its pod is deleted at once ([`reaper`];
//! `control::shadowpod::provider::reap` says why not only the garbage collector), unless that
//! deletion orphans it.
//!
//! It never updates an existing pod (as upstream: a new spec does not reach a running pod),
//! and never touches a pod of that name it does not control (a Warning Event on the ShadowPod
//! says so).

use std::sync::Arc;

use control::{
    api::virtualkubelet::ShadowPod,
    shadowpod::provider::{Action, CONFINED, TERMINATING_AGAIN, decide, made},
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Resource, ResourceExt,
    api::{GetParams, PartialObjectMeta, PostParams},
    runtime::{
        controller::Action as Requeue,
        reflector::{ObjectRef, Store},
    },
};

pub use control::shadowpod::provider::pods_selector;

pub mod reaper;

use crate::{
    context::Context,
    error::{Error, kube as kerr},
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "shadowpod";

/// Reconciles at once (each makes two requests, the ShadowPod read and the pod created; three
/// when the create meets a pod the store does not hold).
pub const CONCURRENCY: u16 = 32;

/// How long a ShadowPod's reconcile waits for more of its events: none. Its first reconcile
/// is what a new pod waits for (a debounce would be added to every offloaded pod's start),
/// and a reconcile of a standing pod reads only the stores.
pub const DEBOUNCE: std::time::Duration = std::time::Duration::ZERO;

/// One reconcile of a ShadowPod (its metadata, as the store keeps it); `owned` holds the
/// metadata of the pods ShadowPods made (the pod of its name is read from there; read from the
/// API server only when a create meets one the store does not hold: not labelled as ours, or
/// not seen yet). The whole ShadowPod is read only to make its pod, from the API server's watch
/// cache at the version the store holds.
pub async fn reconcile(
    shadow: Arc<PartialObjectMeta<ShadowPod>>,
    ctx: Arc<Context>,
    owned: Store<PartialObjectMeta<Pod>>,
    owned_listed: liqo_auth::ready::Listed,
) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    if !owned_listed.await {
        return Err(Error::StoreEnded("the pods ShadowPods made"));
    }
    let ns = shadow.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = shadow.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let seen = owned.get(&ObjectRef::new(&name).within(&ns));
    let reference = shadow.object_ref(&());
    match decide(&*shadow, seen.as_deref()) {
        Action::Create => {
            let shadows: Api<ShadowPod> = Api::namespaced(ctx.client.clone(), &ns);
            // At the version the store holds or newer: an API server whose watch cache has it
            // answers from there, not with a read of etcd. One whose cache is behind (another
            // API server behind a balancer, or its cache rebuilding) answers 504 or 429: then
            // the latest, from etcd.
            let at = shadow
                .metadata
                .resource_version
                .as_deref()
                .map_or_else(GetParams::default, GetParams::at);
            let what = || format!("get ShadowPod {ns}/{name}");
            let full = match shadows.get_with(&name, &at).await {
                Ok(full) => Some(full),
                Err(kube::Error::Api(s)) if s.is_not_found() => None,
                Err(kube::Error::Api(s)) if s.code == 504 || s.code == 429 => {
                    shadows.get_opt(&name).await.map_err(kerr(what()))?
                }
                Err(e) => return Err(kerr(what())(e)),
            };
            // Gone, replaced since the store saw it, or being deleted: its own event comes.
            let Some(full) = full.filter(|f| {
                f.metadata.uid == shadow.metadata.uid && f.metadata.deletion_timestamp.is_none()
            }) else {
                return Ok(Requeue::await_change());
            };
            let Some((pod, removed)) = made(&full) else {
                return Ok(Requeue::await_change());
            };
            create(&ctx, &pods, &shadow, pod, removed, reference).await
        }
        Action::Again(after) => Ok(Requeue::requeue(after)),
        // The ShadowPod is being deleted: the pod's own event follows the delete.
        Action::Reap(doomed) => {
            let uid = shadow.metadata.uid.clone().unwrap_or_default();
            let outcome = reaper::delete_pod(&pods, &name, &uid, doomed).await?;
            tracing::info!(
                pod = %format!("{ns}/{name}"), outcome = outcome.as_str(),
                "the pod of a ShadowPod being deleted"
            );
            Ok(Requeue::await_change())
        }
        Action::Warn(reason, message) => {
            crate::kit::event(&ctx, &reference, true, reason, message).await;
            Ok(Requeue::requeue(ctx.settings.resync))
        }
        // Its pod stands (or the ShadowPod goes): no timer. The two watches bring every
        // change (the pod deleted, evicted or relabelled out of the selector; the ShadowPod
        // changed or deleted); a watch that lost events lists again, and the pods' re-list
        // passes on what it found deleted (`liqo_auth::relist`). A timer on each would keep
        // every ShadowPod in the controller's queue at all times: kube's scheduler, whose map
        // and timer slab never shrink, then held a table of ten thousand at rest.
        Action::Nothing => Ok(Requeue::await_change()),
    }
}

/// Creates the pod of `shadow`; a 409 is decided again on the pod found there.
async fn create(
    ctx: &Context,
    pods: &Api<Pod>,
    shadow: &PartialObjectMeta<ShadowPod>,
    pod: Pod,
    removed: Vec<&'static str>,
    reference: k8s_openapi::api::core::v1::ObjectReference,
) -> Result<Requeue, Error> {
    let ns = shadow.namespace().unwrap_or_default();
    let name = shadow.name_any();
    match pods.create(&PostParams::default(), &pod).await {
        Ok(_) => {
            tracing::info!(pod = %format!("{ns}/{name}"), "created the pod of a ShadowPod");
            if !removed.is_empty() {
                let message = format!(
                    "removed from the pod made here (not for a consumer to set): {}",
                    removed.join(", ")
                );
                crate::kit::event(ctx, &reference, true, CONFINED, message).await;
            }
            // The new pod's event (the pods watch) brings the ShadowPod back.
            Ok(Requeue::await_change())
        }
        // One exists that the store does not hold: read it once and decide on it.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let pod = pods
                .get_metadata_opt(&name)
                .await
                .map_err(kerr(format!("get Pod {ns}/{name}")))?;
            match decide(shadow, pod.as_ref()) {
                Action::Warn(reason, message) => {
                    crate::kit::event(ctx, &reference, true, reason, message).await;
                    Ok(Requeue::requeue(ctx.settings.resync))
                }
                // Ours, yet not in the store (its label removed, or the store behind): no
                // event of it may come, so it is looked at again on the timer.
                Action::Nothing => Ok(Requeue::requeue(ctx.settings.resync)),
                // Gone again or terminating: the next pass observes it.
                _ => Ok(Requeue::requeue(TERMINATING_AGAIN)),
            }
        }
        Err(e) => Err(kerr(format!("create Pod {ns}/{name}"))(e)),
    }
}

//! Namespace offloading's I/O in the controller-manager: [`vnode`], the virtual-node
//! controller (a NamespaceMap per virtual node);
//! [`consumer`], the NamespaceOffloading controller; [`provider`], the NamespaceMap
//! controller on a provider; [`shadowpod`], the ShadowPod controller on a provider (the pods
//! of the consumers' ShadowPods). The decisions of the offloading controllers are
//! `control::offloading`'s (the ShadowPod controller's its own); this module only observes
//! and carries them out, and never serves admission reviews (`crate::webhook` does).

use std::sync::Arc;

use control::api::{
    discovery::ForeignCluster,
    offloading::NamespaceOffloading,
    virtualkubelet::{NamespaceMap, ShadowPod},
};
use futures::{FutureExt, StreamExt, future::BoxFuture};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::{
    Api,
    api::PartialObjectMeta,
    runtime::{
        Controller, WatchStreamExt, controller::Config as ControllerConfig, reflector, watcher,
    },
};

use crate::{
    context::Context,
    inflight::InFlight,
    kit::{events, log, policy, tracked},
    selectors::{replicated, source, virtual_nodes},
};

pub mod consumer;
pub mod provider;
pub mod shadowpod;
pub mod vnode;

/// The offloading controllers (virtual node, NamespaceOffloading, NamespaceMap), to be awaited
/// with the others until `shutdown`.
pub fn controllers(
    ctx: &Arc<Context>,
    shutdown: impl futures::Future<Output = ()> + Send + Sync + Clone + 'static,
    inflight: &InFlight,
    config: &ControllerConfig,
) -> Vec<BoxFuture<'static, ()>> {
    let vnode_trigger = futures::stream::select_all([
        events::<ForeignCluster>(&ctx.client, None).boxed(),
        events::<NamespaceMap>(&ctx.client, Some(&source())).boxed(),
    ]);
    let vnode_controller = Controller::new(
        Api::<Node>::all(ctx.client.clone()),
        watcher::Config::default().labels(&virtual_nodes()),
    )
    .with_config(config.clone())
    .reconcile_all_on(vnode_trigger)
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(vnode::NAME, inflight, vnode::reconcile),
        policy::<Node>(vnode::NAME),
        ctx.clone(),
    )
    .for_each(log(vnode::NAME))
    .boxed();

    let nsof_trigger = futures::stream::select_all([
        events::<Node>(&ctx.client, Some(&virtual_nodes())).boxed(),
        events::<NamespaceMap>(&ctx.client, Some(&source())).boxed(),
    ]);
    let nsof_controller = Controller::new(
        Api::<NamespaceOffloading>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(config.clone())
    .reconcile_all_on(nsof_trigger)
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(consumer::NAME, inflight, consumer::reconcile),
        policy::<NamespaceOffloading>(consumer::NAME),
        ctx.clone(),
    )
    .for_each(log(consumer::NAME))
    .boxed();

    let nsmap_controller = Controller::new(
        Api::<NamespaceMap>::all(ctx.client.clone()),
        watcher::Config::default().labels(&replicated()),
    )
    // A namespace's event concerns the map that manages it (its annotation), no other.
    .watches(
        Api::<Namespace>::all(ctx.client.clone()),
        watcher::Config::default().labels(control::consts::labels::REMOTE_CLUSTER_ID),
        |n| provider::map_of(&n),
    )
    .with_config(config.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(provider::NAME, inflight, provider::reconcile),
        policy::<NamespaceMap>(provider::NAME),
        ctx.clone(),
    )
    .for_each(log(provider::NAME))
    .boxed();

    // A provider's ShadowPods: their pods re-created when deleted (the owned pods' events).
    // Both watched as metadata (kube asks `Api<PartialObjectMeta<_>>` for metadata only) and
    // stored trimmed (`control::lean::{shadow, owned_pod}`): the decision reads whose pod it
    // is and whether either terminates; a ShadowPod's spec is read (one GET) only to make its
    // pod. So memory follows the number of ShadowPods, not their specs, and a reconcile reads
    // the pod from the store. Both stores are rebuilt once most of them is deleted
    // (`liqo_auth::compact`).
    // A ShadowPod deleted (or found deleted by a re-list) goes to the reaper, which deletes
    // its pod at once (`shadowpod::reaper`).
    let (shadows, shadow_writer) = reflector::store();
    let (gone_tx, gone_rx) = futures::channel::mpsc::unbounded();
    let shadow_stream = liqo_auth::relist::with_deletions(
        liqo_auth::compact::reflect(
            watcher(
                Api::<PartialObjectMeta<ShadowPod>>::all(ctx.client.clone()),
                liqo_auth::compact::listing(),
            )
            .default_backoff()
            .modify(|s| control::lean::shadow(&mut s.metadata)),
            shadow_writer,
        ),
        shadows.clone(),
    )
    .inspect(move |event| {
        if let Some(gone) = shadowpod::reaper::Gone::of(event)
            && gone_tx.unbounded_send(gone).is_err()
        {
            // The reaper ended (shutdown, or the pods' store ended before its list): the
            // garbage collector deletes the pod.
            tracing::debug!("the ShadowPod reaper has stopped");
        }
    })
    .applied_objects();
    let (owned, pod_writer) = reflector::store();
    // A re-list's implied deletions are passed on (`liqo_auth::relist`): a pod deleted while
    // the watch was cut brings its ShadowPod back, as a pod deleted under the watch does (the
    // controller keeps no timer on a standing pod).
    let pod_stream = liqo_auth::relist::with_deletions(
        liqo_auth::compact::reflect(
            watcher(
                Api::<PartialObjectMeta<Pod>>::all(ctx.client.clone()),
                liqo_auth::compact::listing().labels(&shadowpod::pods_selector()),
            )
            .default_backoff()
            .modify(|p| control::lean::owned_pod(&mut p.metadata)),
            pod_writer,
        ),
        owned.clone(),
    )
    .touched_objects();
    // kube waits for the ShadowPods' store only; a reconcile also waits for the pods' (else it
    // would take a pod not listed yet for absent: a create, a 409, a GET).
    let owned_listed = liqo_auth::ready::shared(&owned);
    let reaper = shadowpod::reaper::run(
        gone_rx,
        ctx.clone(),
        owned.clone(),
        owned_listed.clone(),
        shutdown.clone(),
    )
    .boxed();
    // At most `shadowpod::CONCURRENCY` reconciles at once: a burst of ten thousand ShadowPods
    // queues here, not as requests in the client's rate limiter (where the virtual kubelets'
    // Lease renewals would wait behind them). No debounce (the other controllers' 100 ms):
    // it would be added to every offloaded pod's start.
    let shadowpod_controller = Controller::for_stream(shadow_stream, shadows)
        .owns_stream(pod_stream)
        .with_config(
            config
                .clone()
                .debounce(shadowpod::DEBOUNCE)
                .concurrency(shadowpod::CONCURRENCY),
        )
        .graceful_shutdown_on(shutdown.clone())
        .run(
            tracked(shadowpod::NAME, inflight, move |s, c| {
                shadowpod::reconcile(s, c, owned.clone(), owned_listed.clone())
            }),
            policy::<PartialObjectMeta<ShadowPod>>(shadowpod::NAME),
            ctx.clone(),
        )
        .for_each(log(shadowpod::NAME))
        .boxed();

    vec![
        vnode_controller,
        nsof_controller,
        nsmap_controller,
        shadowpod_controller,
        reaper,
    ]
}

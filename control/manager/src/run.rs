//! Runs the controllers on one apiserver until shutdown (the network manager only with an
//! IPAM): each a kube-runtime
//! `Controller` whose error policy counts the error and requeues. A shutdown is bounded
//! ([`run_bounded`]): the controllers stop taking work, the reconciles under way get a grace,
//! then the ones still running (e.g. waiting on a peer that never answers) are dropped and
//! named ([`crate::inflight::InFlight`]).

use std::{sync::Arc, time::Duration};

use control::api::{
    discovery::{ForeignCluster, ResourceRequest},
    net::TunnelEndpoint,
    sharing::ResourceOffer,
};
use futures::{FutureExt, StreamExt, future::BoxFuture};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::{
    Api,
    runtime::{
        Controller, WatchStreamExt,
        controller::{Action as Requeue, Config as ControllerConfig},
        watcher,
    },
};

use crate::{
    context::Context,
    error::Error,
    fc,
    inflight::InFlight,
    kit::{OFFER_THROTTLE, RETRY, events, log, policy, throttled, tracked},
    network, offer, replicator, request,
    selectors::{replicated, source},
};

/// How long the reconciles under way may take to finish after a shutdown signal (the
/// default of `--shutdown-grace`).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The controllers (eight, nine with the network manager; four are `crate::offloading`'s), to be
/// awaited together until `shutdown`.
pub fn controllers(
    ctx: Arc<Context>,
    shutdown: impl futures::Future<Output = ()> + Send + Sync + Clone + 'static,
    inflight: &InFlight,
) -> Vec<BoxFuture<'static, ()>> {
    let client = ctx.client.clone();
    let config = ControllerConfig::default().debounce(Duration::from_millis(100));
    let fcs = || Api::<ForeignCluster>::all(client.clone());

    // The ForeignCluster controller: its objects, plus any request, offer or identity event.
    let fc_trigger = futures::stream::select_all([
        events::<ResourceRequest>(&client, None).boxed(),
        events::<ResourceOffer>(&client, None).boxed(),
        events::<Secret>(&client, Some(control::consts::labels::LOCAL_IDENTITY)).boxed(),
        // A peer's token written (again): a corrected token is tried at once.
        events::<Secret>(&client, Some(control::consts::labels::AUTH_TOKEN)).boxed(),
        // NETWORKING follows the TunnelEndpoints, and says when the peer refused our
        // NetworkConfig (its status.refused, reflected back on our own, replicated, copy)...
        events::<TunnelEndpoint>(&client, None).boxed(),
        events::<control::api::net::NetworkConfig>(
            &client,
            Some(&format!("{}=true", control::consts::labels::REPLICATION)),
        )
        .boxed(),
        // ... while the gateway Lease is fresh: its expiry is a requeue, its return an event.
        crate::gateway_lease::returns(&client, &ctx.settings.namespace, ctx.gateway_lease.clone())
            .boxed(),
    ]);
    let fc_controller = Controller::new(fcs(), watcher::Config::default())
        .with_config(config.clone())
        .reconcile_all_on(fc_trigger)
        .graceful_shutdown_on(shutdown.clone())
        .run(
            tracked(fc::NAME, inflight, fc::reconcile),
            policy::<ForeignCluster>(fc::NAME),
            ctx.clone(),
        )
        .for_each(log(fc::NAME))
        .boxed();

    // The replicator: per ForeignCluster, on our sources' and the peers' copies' events.
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let rep = Arc::new(replicator::Replicator::new(ctx.clone(), tx));
    let rep_trigger = futures::stream::select(replicator::local_sources(client.clone()), rx);
    let rep_policy = |_: Arc<ForeignCluster>, error: &Error, r: Arc<replicator::Replicator>| {
        r.ctx.metrics.error(replicator::NAME);
        tracing::warn!(controller = replicator::NAME, error = %liqo_types::chain(error), "reconcile failed");
        Requeue::requeue(RETRY)
    };
    let rep_controller = Controller::new(fcs(), watcher::Config::default())
        .with_config(config.clone())
        .reconcile_all_on(rep_trigger)
        .graceful_shutdown_on(shutdown.clone())
        .run(
            tracked(replicator::NAME, inflight, replicator::reconcile),
            rep_policy,
            rep,
        )
        .for_each(log(replicator::NAME))
        .boxed();

    // The ResourceRequest controller on copies: also on nodes, pods, ForeignClusters and
    // offers (the offer follows them).
    // Pods come and go by the thousand on a busy provider (every pod offloaded to us is
    // one): their events recompute the offers at most every OFFER_THROTTLE, the first at once.
    let rr_trigger = futures::stream::select_all([
        throttled(events::<Node>(&client, None), OFFER_THROTTLE).boxed(),
        throttled(offer_pods(&ctx), OFFER_THROTTLE).boxed(),
        events::<ForeignCluster>(&client, None).boxed(),
        events::<ResourceOffer>(&client, Some(&source())).boxed(),
    ]);
    let rr_controller = Controller::new(
        Api::<ResourceRequest>::all(client.clone()),
        watcher::Config::default().labels(&replicated()),
    )
    .with_config(config.clone())
    .reconcile_all_on(rr_trigger)
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(request::NAME, inflight, request::reconcile),
        policy::<ResourceRequest>(request::NAME),
        ctx.clone(),
    )
    .for_each(log(request::NAME))
    .boxed();

    // The ResourceOffer controller on copies.
    let ro_controller = Controller::new(
        Api::<ResourceOffer>::all(client.clone()),
        watcher::Config::default().labels(&replicated()),
    )
    .with_config(config.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(
        tracked(offer::NAME, inflight, offer::reconcile),
        policy::<ResourceOffer>(offer::NAME),
        ctx.clone(),
    )
    .for_each(log(offer::NAME))
    .boxed();

    let mut all = vec![fc_controller, rep_controller, rr_controller, ro_controller];
    all.extend(crate::offloading::controllers(
        &ctx,
        shutdown.clone(),
        inflight,
        &config,
    ));
    all.extend(crate::storage::controllers(
        &ctx,
        shutdown.clone(),
        inflight,
        &config,
    ));
    // The network manager, per ForeignCluster, when an IPAM is configured; its failures back
    // off (an IPAM that is down is not asked every 2 s).
    match ctx.network.clone() {
        Some(m) => {
            let trigger = network::controller_trigger(client.clone(), &ctx.settings.namespace, &m);
            let net_policy = |fc: Arc<ForeignCluster>, error: &Error, ctx: Arc<Context>| {
                ctx.metrics.error(network::NAME);
                let delay = ctx.network.as_ref().map_or(RETRY, |m| {
                    m.backoff(&kube::ResourceExt::name_any(fc.as_ref()))
                });
                tracing::warn!(controller = network::NAME, error = %liqo_types::chain(error), retry = ?delay, "reconcile failed");
                Requeue::requeue(delay)
            };
            let controller = Controller::new(fcs(), watcher::Config::default());
            all.push(
                network::watch::watch_peers(controller, &client)
                    .with_config(config)
                    .reconcile_all_on(trigger)
                    .graceful_shutdown_on(shutdown)
                    .run(
                        tracked(network::NAME, inflight, network::reconcile),
                        net_policy,
                        ctx,
                    )
                    .for_each(log(network::NAME))
                    .boxed(),
            );
        }
        None => {
            tracing::info!(
                "no --ipam-address: the network manager is off (no NetworkConfig or TunnelEndpoint is made; NETWORKING stays None)"
            );
            // A ForeignCluster still holding the network finalizer (from a run with an IPAM)
            // is let go when deleted, with an Event.
            let u = Arc::new(network::abandon::Unmanaged::new(ctx.clone()));
            let policy = |_: Arc<ForeignCluster>,
                          error: &Error,
                          u: Arc<network::abandon::Unmanaged>| {
                u.ctx.metrics.error(network::NAME);
                tracing::warn!(controller = network::NAME, error = %liqo_types::chain(error), "reconcile failed");
                Requeue::requeue(RETRY)
            };
            all.push(
                Controller::new(fcs(), watcher::Config::default())
                    .with_config(config)
                    .graceful_shutdown_on(shutdown)
                    .run(
                        tracked(
                            network::NAME,
                            inflight,
                            network::abandon::reconcile_unmanaged,
                        ),
                        policy,
                        u,
                    )
                    .for_each(log(network::NAME))
                    .boxed(),
            );
        }
    }
    all
}

/// How a run of the controllers ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// Every controller stopped (within the grace after a shutdown signal).
    Clean,
    /// The controllers ended on their own, with no shutdown signal: a failure (the process
    /// exits non-zero).
    Ended,
    /// The grace passed: these reconciles were still running and were dropped.
    Abandoned(Vec<String>),
}

/// Runs the controllers until `shutdown`, then gives the reconciles under way `grace` to
/// finish; past it they are dropped (the in-flight calls cancelled) and named in the result.
pub async fn run_bounded(
    ctx: Arc<Context>,
    shutdown: impl futures::Future<Output = ()> + Send + Sync + Clone + 'static,
    grace: Duration,
) -> Stopped {
    let inflight = InFlight::default();
    let all = futures::future::join_all(controllers(ctx, shutdown.clone(), &inflight));
    tokio::pin!(all);
    let signalled = shutdown.clone();
    tokio::select! {
        _ = &mut all => {
            // The controllers end as soon as they see the signal: if it has come (the signal
            // task runs on another thread), this is a clean stop, not an unexpected end.
            if futures::FutureExt::now_or_never(signalled).is_some() {
                return Stopped::Clean;
            }
            tracing::error!("the controllers ended without a shutdown signal");
            return Stopped::Ended;
        }
        () = shutdown => {}
    }
    let running = inflight.describe();
    if !running.is_empty() {
        tracing::info!(grace = ?grace, running = ?running, "shutting down: waiting for the reconciles under way");
    }
    match tokio::time::timeout(grace, all).await {
        Ok(_) => Stopped::Clean,
        Err(_elapsed) => {
            let running = inflight.describe();
            for r in &running {
                tracing::warn!(reconcile = %r, "still running after the shutdown grace: dropped");
            }
            Stopped::Abandoned(running)
        }
    }
}

/// Runs the controllers until `shutdown` (with the default grace; see [`run_bounded`]).
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl futures::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    // Abandoned reconciles and an end without a signal were logged by run_bounded; the
    // caller only needs it over.
    drop(run_bounded(ctx, shutdown, DEFAULT_SHUTDOWN_GRACE).await);
}

/// The pods' events for the offers, feeding [`Context::offer_pods`] (each read as a
/// `control::offer::OfferPod`: what the offer reads, decoded once). A second call (the writer
/// taken already) only watches.
fn offer_pods(ctx: &Context) -> futures::stream::BoxStream<'static, ()> {
    let api: Api<control::offer::OfferPod> = Api::all(ctx.client.clone());
    let events = watcher(api, liqo_auth::compact::listing()).default_backoff();
    match ctx.take_offer_pods_writer() {
        // Rebuilt once most of it is deleted (`liqo_auth::compact`).
        Some(writer) => liqo_auth::compact::reflect(events, writer)
            .map(|_| ())
            .boxed(),
        None => events.map(|_| ()).boxed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_gives_one_trigger_at_once_and_one_at_its_end() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<()>();
        let period = Duration::from_millis(200);
        let mut out = Box::pin(throttled(rx, period));
        let t = std::time::Instant::now();
        for _ in 0..50 {
            tx.unbounded_send(()).unwrap();
        }
        out.next().await.unwrap();
        assert!(t.elapsed() < period, "the first at once");
        out.next().await.unwrap();
        assert!(t.elapsed() >= period, "the rest at the end of the period");
        // Nothing more came: nothing more goes out.
        let quiet = tokio::time::timeout(period * 3, out.next()).await;
        assert!(quiet.is_err(), "no trigger without events");
        // A new event passes at once again.
        let t = std::time::Instant::now();
        tx.unbounded_send(()).unwrap();
        out.next().await.unwrap();
        assert!(t.elapsed() < period);
        tx.close_channel();
        assert_eq!(out.next().await, None, "ends with the events");
    }
}

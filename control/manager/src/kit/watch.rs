//! How the controllers are wired to kube-runtime: reconcilers recorded in flight, trigger
//! streams of a kind's events (throttled where a burst would recompute too much), the error
//! policy (count, log the cause chain, requeue after [`super::RETRY`]) and the stream logger.

use std::{sync::Arc, time::Duration};

use futures::{FutureExt, Stream, StreamExt, future::BoxFuture};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, controller::Action as Requeue, watcher},
};
use serde::de::DeserializeOwned;

use crate::{context::Context, error::Error, inflight::InFlight, kit::retry::RETRY};

/// A reconciler whose runs are recorded in `inflight`.
pub fn tracked<K, C, F, Fut>(
    controller: &'static str,
    inflight: &InFlight,
    reconcile: F,
) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Requeue, Error>> + use<K, C, F, Fut>
where
    K: Resource,
    F: Fn(Arc<K>, Arc<C>) -> Fut,
    Fut: futures::Future<Output = Result<Requeue, Error>> + Send + 'static,
{
    let inflight = inflight.clone();
    move |obj, ctx| {
        let name = match obj.meta().namespace.as_deref() {
            Some(ns) => format!("{ns}/{}", obj.meta().name.as_deref().unwrap_or_default()),
            None => obj.meta().name.clone().unwrap_or_default(),
        };
        let running = inflight.start(controller, name);
        let fut = reconcile(obj, ctx);
        async move {
            let out = fut.await;
            drop(running);
            out
        }
        .boxed()
    }
}

/// Events of a kind (all namespaces, optional label selector), one `()` each.
pub fn events<K>(client: &Client, selector: Option<&str>) -> impl Stream<Item = ()> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let mut config = watcher::Config::default();
    if let Some(s) = selector {
        config = config.labels(s);
    }
    watcher(api, config).default_backoff().map(|_| ())
}

/// How often pod and node events may recompute the ResourceOffers (each recomputation lists
/// every node; the pods come from the store their watch keeps).
pub const OFFER_THROTTLE: Duration = Duration::from_secs(2);

/// `events`, at most one every `period` plus one at the end of a burst: the first passes at
/// once, the rest of a burst is folded into one trigger at the end of its period.
pub fn throttled(
    events: impl Stream<Item = ()> + Send + 'static,
    period: Duration,
) -> impl Stream<Item = ()> + Send + 'static {
    use futures::SinkExt;
    let (mut tx, rx) = futures::channel::mpsc::channel(1);
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        // Ends when the events end or nobody listens any more (a failed send).
        while events.next().await.is_some() {
            if tx.send(()).await.is_err() {
                return;
            }
            loop {
                let until = tokio::time::Instant::now() + period;
                let mut more = false;
                loop {
                    match tokio::time::timeout_at(until, events.next()).await {
                        Ok(Some(())) => more = true,
                        Ok(None) => return,
                        Err(_elapsed) => break,
                    }
                }
                if !more {
                    break;
                }
                if tx.send(()).await.is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A controller's error policy: counts the error under `name`, logs it with its causes and
/// requeues after [`RETRY`].
pub fn policy<K>(name: &'static str) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Requeue {
    move |_, error, ctx| {
        ctx.metrics.error(name);
        tracing::warn!(controller = name, error = %liqo_types::chain(error), "reconcile failed");
        Requeue::requeue(RETRY)
    }
}

/// Logs (at debug) what a controller's stream yields as an error, under `controller`.
pub fn log<T, E: std::fmt::Debug>(
    controller: &'static str,
) -> impl FnMut(Result<T, E>) -> futures::future::Ready<()> {
    move |r| {
        if let Err(e) = r {
            tracing::debug!(controller, error = ?e, "controller event");
        }
        futures::future::ready(())
    }
}

//! The pod webhook's NamespaceOffloading lookup: a watched store first, the API server when
//! the store does not hold the namespace's (not listed yet, or one created a moment ago that
//! the watch has not brought) or is not trusted. A pod created in an offloaded namespace then
//! costs no read.
//!
//! The store is trusted once listed, while its watch runs, and [`DISTRUST_AFTER_ERROR`] past
//! the watch's last error: a watch that fails keeps failing at least as often as its backoff
//! retries, so a broken watch (whose store would only get staler) is never trusted, and a
//! recovered one is trusted again. A copy in a trusted store may be a moment old, as any
//! controller's view: a pod admitted then is treated as if it had come a moment earlier.
//!
//! It never writes.

use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use control::api::offloading::{self, NamespaceOffloading};
use futures::StreamExt;
use kube::{
    Api, Client, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};

use super::server::{Looked, Lookup};

/// How long after the watch's last error its store is not trusted: more than the watcher's
/// longest backoff (kube's default: 30 s), so that errors of a broken watch keep it so.
pub(super) const DISTRUST_AFTER_ERROR: Duration = Duration::from_secs(60);

/// What the watch has shown of its health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Health {
    /// The first list is done.
    pub(super) listed: bool,
    /// The watch ended (its task stopped): the store is never updated again.
    pub(super) ended: bool,
    /// When it last failed.
    pub(super) last_error: Option<Instant>,
}

impl Health {
    /// Whether the store may answer at `now`.
    pub(super) fn trusted(&self, now: Instant) -> bool {
        self.listed
            && !self.ended
            && self
                .last_error
                .is_none_or(|e| now.saturating_duration_since(e) >= DISTRUST_AFTER_ERROR)
    }
}

/// The lookup, and the watch feeding its store (to run beside the server).
pub(super) fn watched(client: Client) -> (Lookup, impl Future<Output = ()> + Send + 'static) {
    let (store, writer) = reflector::store::<NamespaceOffloading>();
    let health = Arc::new(Mutex::new(Health::default()));
    let api: Api<NamespaceOffloading> = Api::all(client.clone());
    let watching = health.clone();
    let watch = async move {
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|o| control::lean::meta(o.meta_mut()))
            .reflect(writer);
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let mut h = watching.lock().unwrap_or_else(|p| p.into_inner());
            match event {
                Ok(watcher::Event::InitDone) => h.listed = true,
                Ok(_) => {}
                Err(e) => {
                    h.last_error = Some(Instant::now());
                    tracing::warn!(
                        error = %liqo_types::chain(&e),
                        "watching NamespaceOffloadings for the pod webhook (each pod reads its \
                         namespace's from the API server until the watch has run {} s without \
                         an error)",
                        DISTRUST_AFTER_ERROR.as_secs()
                    );
                }
            }
        }
        watching.lock().unwrap_or_else(|p| p.into_inner()).ended = true;
    };
    let lookup: Lookup = Arc::new(move |namespace: String| {
        let (store, client) = (store.clone(), client.clone());
        let trusted = health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .trusted(Instant::now());
        Box::pin(async move { look(trusted.then_some(&store), client, namespace).await })
    });
    (lookup, watch)
}

/// `namespace`'s NamespaceOffloading from `store` (when trusted), else from the API server.
async fn look(
    store: Option<&Store<NamespaceOffloading>>,
    client: Client,
    namespace: String,
) -> Looked {
    let key = ObjectRef::new(offloading::NAME).within(&namespace);
    if let Some(o) = store.and_then(|s| s.get(&key)) {
        return Ok(Some((*o).clone()));
    }
    let api: Api<NamespaceOffloading> = Api::namespaced(client, &namespace);
    api.get_opt(offloading::NAME)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_trusted_once_listed_while_its_watch_runs_and_away_from_errors() {
        let t0 = Instant::now();
        let listed = Health {
            listed: true,
            ..Health::default()
        };
        assert!(!Health::default().trusted(t0), "not listed yet");
        assert!(listed.trusted(t0));
        let failed = Health {
            last_error: Some(t0),
            ..listed
        };
        assert!(!failed.trusted(t0 + DISTRUST_AFTER_ERROR - Duration::from_secs(1)));
        assert!(failed.trusted(t0 + DISTRUST_AFTER_ERROR), "recovered");
        let ended = Health {
            ended: true,
            ..listed
        };
        assert!(
            !ended.trusted(t0 + DISTRUST_AFTER_ERROR * 10),
            "never again"
        );
    }
}

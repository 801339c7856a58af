//! The pod webhook's NamespaceOffloading lookup: a watched store first, the API server when
//! the store does not hold the namespace's (not listed yet, or one created a moment ago that
//! the watch has not brought). A pod created in an offloaded namespace costs no read.
//!
//! It never writes. A store's copy may be a moment old, as any controller's view: a pod
//! admitted then is treated as if it had come a moment earlier.

use std::{future::Future, sync::Arc};

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

/// The lookup, and the watch feeding its store (to run beside the server; it ends only if
/// the watch stream does).
pub(super) fn watched(client: Client) -> (Lookup, impl Future<Output = ()> + Send + 'static) {
    let (store, writer) = reflector::store::<NamespaceOffloading>();
    let api: Api<NamespaceOffloading> = Api::all(client.clone());
    let watch = async move {
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|o| control::lean::meta(o.meta_mut()))
            .reflect(writer);
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            if let Err(e) = event {
                tracing::warn!(
                    error = %liqo_types::chain(&e),
                    "watching NamespaceOffloadings for the pod webhook (each pod reads its \
                     namespace's from the API server meanwhile)"
                );
            }
        }
    };
    let lookup: Lookup = Arc::new(move |namespace: String| {
        let (store, client) = (store.clone(), client.clone());
        Box::pin(async move { look(&store, client, namespace).await })
    });
    (lookup, watch)
}

/// `namespace`'s NamespaceOffloading from `store`, else from the API server.
async fn look(store: &Store<NamespaceOffloading>, client: Client, namespace: String) -> Looked {
    if let Some(o) = store.get(&ObjectRef::new(offloading::NAME).within(&namespace)) {
        return Ok(Some((*o).clone()));
    }
    let api: Api<NamespaceOffloading> = Api::namespaced(client, &namespace);
    api.get_opt(offloading::NAME)
        .await
        .map_err(|e| e.to_string())
}

//! The watches of pod reflection, each into a reflector store, each event queuing the local
//! key: the local pods on the node, our NamespaceMaps (the mapping, whose changes start and
//! stop the per-namespace remote watches), and per mapped namespace the remote ShadowPods and
//! Pods with the reflection labels (and, with API server support, the deletions of the pods'
//! token Secrets: [`super::token_watch`]).
//!
//! After a watch re-lists, the keys of what changed meanwhile are queued, and those of objects
//! the list lacks (deleted while the watch was down: no event of their own); an object listed
//! again unchanged is not (a re-list of ten thousand pods is not ten thousand reconciles).

use std::{collections::HashSet, sync::Arc};

use control::{
    api::virtualkubelet::{NamespaceMap, ShadowPod},
    lean::StoredPod,
    shadowpod::{consumer::reflection_selector, token::POD_LABEL},
};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Resource,
    api::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store, store::Writer},
        watcher,
    },
};
use tokio::{sync::watch::Sender, task::JoinHandle};

use super::{key::Key, mapped::Namespace, queue::Queue, shared::Shared};
use crate::{VkConfig, namespaces};

/// Feeds `writer` from `events`, queuing `key(object)` for every object touched (`None`: no
/// key stands for it). A re-list queues only what it changed, once it is done (before, the
/// store still holds what it held before the re-list: a worker would decide on that): an
/// object listed again with the resource version the store holds is not queued, one the store
/// held that the list lacks is. `key` must map one object of the store to one key. The store
/// is rebuilt once most of it is deleted (`liqo_auth::compact`).
pub(crate) async fn feed<K, S>(
    events: S,
    writer: Writer<K>,
    queue: Arc<Queue<Key>>,
    key: impl Fn(&K) -> Option<Key>,
) where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
{
    let reader = writer.as_reader();
    // During a list: the keys the store held, and those the list changed or brought.
    let mut before: HashSet<Key> = HashSet::new();
    let mut changed: Vec<Key> = Vec::new();
    let mut events = std::pin::pin!(liqo_auth::compact::reflect(events, writer));
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => {
                before = reader.state().iter().filter_map(|o| key(o)).collect();
                changed.clear();
            }
            Ok(watcher::Event::InitApply(o)) => {
                let Some(k) = key(&o) else { continue };
                // Until the list is done the store holds what it held before it.
                let unchanged = before.remove(&k)
                    && reader
                        .get(&ObjectRef::from_obj(&o))
                        .is_some_and(|old| same_version(old.meta(), o.meta()));
                if !unchanged {
                    changed.push(k);
                }
            }
            Ok(watcher::Event::InitDone) => {
                for k in changed.drain(..).chain(before.drain()) {
                    queue.add(k);
                }
                changed.shrink_to_fit();
                liqo_auth::compact::shrink_set(&mut before);
            }
            Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                if let Some(k) = key(&o) {
                    queue.add(k);
                }
            }
            // The watcher retries with its backoff; the store keeps what it had.
            Err(e) => tracing::warn!(error = %e, kind = %K::kind(&()), "watch failed, retrying"),
        }
    }
}

/// Whether two views of an object are the same version of it (a resource version is never
/// reused; without one, never the same).
fn same_version(
    a: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    b: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    a.uid == b.uid && a.resource_version.is_some() && a.resource_version == b.resource_version
}

fn key_of<K: Resource>(namespace: &str) -> impl Fn(&K) -> Option<Key> + use<K> {
    let namespace = namespace.to_owned();
    move |o: &K| {
        Some(Key {
            namespace: namespace.clone(),
            name: o.meta().name.clone().unwrap_or_default(),
        })
    }
}

/// The local pods on the node (all namespaces, field selector `spec.nodeName`).
pub async fn local_pods(
    cfg: Arc<VkConfig>,
    writer: Writer<StoredPod>,
    queue: Arc<Queue<Key>>,
) -> &'static str {
    let api: Api<StoredPod> = Api::all(cfg.local.clone());
    let config =
        liqo_auth::compact::listing().fields(&format!("spec.nodeName={}", cfg.node_name()));
    // Stored without managed fields, the spec and status compact: the forged ShadowPod reads
    // the spec, the rest the metadata and status.
    let events = watcher(api, config)
        .default_backoff()
        .modify(|p| control::lean::meta(&mut p.metadata));
    feed(events, writer, queue, |p: &StoredPod| {
        Some(Key {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
        })
    })
    .await;
    "local pod watch"
}

/// Our NamespaceMaps: after each change, the mapping applied to the per-namespace watches and
/// published on `mapping` (resource reflection follows it); `mapped` set once the first
/// listing is applied (workers wait for it: before, every pod would look unmapped).
pub async fn namespace_maps(
    shared: Arc<Shared>,
    mapped: Sender<bool>,
    mapping: Sender<Arc<namespaces::Mapping>>,
) -> &'static str {
    let cfg = &shared.cfg;
    let api: Api<NamespaceMap> = Api::namespaced(cfg.local.clone(), &cfg.tenant_namespace);
    let config = watcher::Config::default().labels(&namespaces::selector(cfg));
    let (reader, writer) = reflector::store();
    let mut events = std::pin::pin!(watcher(api, config).default_backoff().reflect(writer));
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::InitDone) => listed = true,
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) if listed => {}
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "NamespaceMap watch failed, retrying");
                continue;
            }
        }
        let state = reader.state();
        let current = namespaces::accepted(state.iter().map(|m| m.as_ref()));
        sync(&shared, &current);
        // The mapping first: what waits for `mapped` (the sweep of endpoint mappings) reads
        // the listed mapping then.
        mapping.send_if_modified(|m| {
            let changed = **m != current;
            if changed {
                *m = Arc::new(current.clone());
            }
            changed
        });
        mapped.send_replace(true);
    }
    "NamespaceMap watch"
}

/// Starts the watches of newly mapped namespaces (and of those mapped elsewhere now), stops
/// those no longer mapped and queues their local pods (the fallback rejects them).
fn sync(shared: &Shared, mapping: &namespaces::Mapping) {
    let mut unmapped = Vec::new();
    {
        let mut map = shared.namespaces.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|local, ns| {
            let keep = mapping.get(local) == Some(&ns.remote);
            if !keep {
                unmapped.push(local.clone());
            }
            keep
        });
        for (local, remote) in mapping {
            if !map.contains_key(local) {
                tracing::info!(local = %local, remote = %remote, "reflecting pods of namespace");
                map.insert(local.clone(), start(shared, local, remote));
            }
        }
    }
    for local in unmapped {
        tracing::info!(local = %local, "namespace no longer reflected");
        queue_namespace(&shared.local, &shared.queue, &local);
    }
}

fn queue_namespace(local: &Store<StoredPod>, queue: &Queue<Key>, namespace: &str) {
    for p in local.state() {
        if p.metadata.namespace.as_deref() == Some(namespace) {
            queue.add(Key {
                namespace: namespace.to_owned(),
                name: p.metadata.name.clone().unwrap_or_default(),
            });
        }
    }
}

/// The remote watches of one mapped namespace, and the task that marks it ready (then queues
/// its local pods) once they have listed (with API server support, the token Secrets' watch
/// too).
fn start(shared: &Shared, local: &str, remote: &str) -> Namespace {
    let cfg = &shared.cfg;
    let selector = reflection_selector(&cfg.home.cluster_id, &cfg.foreign.cluster_id);
    let config = liqo_auth::compact::listing().labels(&selector);
    let (shadows, shadow_writer) = reflector::store();
    let (pods, pod_writer) = reflector::store();
    let shadow_api: Api<PartialObjectMeta<ShadowPod>> =
        Api::namespaced(cfg.remote.watch.clone(), remote);
    let pod_api: Api<StoredPod> = Api::namespaced(cfg.remote.watch.clone(), remote);
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // With API server support, the token Secrets' first listing too: a token written before
    // it, whose Secret is deleted before it, would be seen neither deleted nor gone.
    let (tokens_listed, tokens_listed_rx) = if cfg.api_support() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    // Stored lean: the ShadowPods' metadata only, watched as such (kube asks
    // `Api<PartialObjectMeta<_>>` for metadata only: whose, when, and the digest of what was
    // forged: `control::lean::shadow`), the remote pods without their spec (the ShadowPod's;
    // their status, whose they are and their owner are what is read: `lean::remote_pod`).
    let t1: JoinHandle<()> = tokio::spawn(feed(
        watcher(shadow_api, config.clone())
            .default_backoff()
            .modify(|s| control::lean::shadow(&mut s.metadata)),
        shadow_writer,
        shared.queue.clone(),
        key_of::<PartialObjectMeta<ShadowPod>>(local),
    ));
    let t2: JoinHandle<()> = tokio::spawn(feed(
        watcher(pod_api, config).default_backoff().modify(|p| {
            control::lean::remote_pod(&mut p.metadata);
            p.without_spec();
        }),
        pod_writer,
        shared.queue.clone(),
        key_of::<StoredPod>(local),
    ));
    let t3 = tokio::spawn({
        let (shadows, pods, ready) = (shadows.clone(), pods.clone(), ready.clone());
        let (local_pods, queue, local) =
            (shared.local.clone(), shared.queue.clone(), local.to_owned());
        async move {
            // The writers (and the token watch) live in the tasks above and below, aborted
            // together with this one.
            if shadows.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            if let Some(rx) = tokens_listed_rx
                && rx.await.is_err()
            {
                return;
            }
            ready.store(true, std::sync::atomic::Ordering::Release);
            tracing::debug!(namespace = %local, "remote stores listed");
            // Every key seen while the namespace was not ready was skipped: the local pods,
            // and the remote objects (an orphan ShadowPod has no local pod to queue it).
            queue_namespace(&local_pods, &queue, &local);
            let names = shadows
                .state()
                .iter()
                .map(|s| s.metadata.name.clone())
                .chain(pods.state().iter().map(|p| p.metadata.name.clone()))
                .collect::<Vec<_>>();
            for name in names.into_iter().flatten() {
                queue.add(Key {
                    namespace: local.clone(),
                    name,
                });
            }
        }
    });
    let t4 = tokio::spawn(super::events::follow(
        super::events::Follow {
            cfg: cfg.clone(),
            local: shared.local.clone(),
            remote_pods: pods.clone(),
        },
        local.to_owned(),
        remote.to_owned(),
    ));
    let mut tasks = vec![
        t1.abort_handle(),
        t2.abort_handle(),
        t3.abort_handle(),
        t4.abort_handle(),
    ];
    if let Some(listed) = tokens_listed {
        let api: Api<PartialObjectMeta<Secret>> = Api::namespaced(cfg.remote.watch.clone(), remote);
        let config = liqo_auth::compact::listing().labels(&format!("{selector},{POD_LABEL}"));
        let t = tokio::spawn(super::token_watch::follow(
            api,
            config,
            local.to_owned(),
            shared.tokens.clone(),
            shared.queue.clone(),
            listed,
        ));
        tasks.push(t.abort_handle());
    }
    Namespace {
        remote: remote.to_owned(),
        shadows,
        pods,
        ready,
        tasks,
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;

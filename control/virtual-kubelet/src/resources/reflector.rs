//! One kind's reflector: per offloaded namespace a local and a remote watch (both scoped to
//! the namespace: RBAC on the provider is per namespace) into reflector stores, every event
//! queuing the local name; a keyed de-duplicating queue; the workers ([`super::worker`]).
//! The remote watch sees every object of the kind in the remote namespace, ours or not, so
//! that a name taken by someone else is seen (and reported) without a read; its store keeps
//! them as the kind's [`Reflector::trim`] leaves them (an offloaded pod's token Secret without
//! its token).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, Ordering},
    },
};

use control::reflection::{Ctx, Reflect};
use kube::{
    Api,
    runtime::{
        WatchStreamExt,
        events::Recorder,
        reflector::{self, Store},
        watcher,
    },
};
use tokio::task::AbortHandle;

use crate::{
    VkConfig,
    namespaces::Mapping,
    reflection::{key::Key, queue::Queue, watch::feed},
};

/// A namespace pair as one kind's reflector holds it.
pub struct Pair<K: Reflect> {
    /// The remote namespace.
    pub remote: String,
    /// The local objects.
    pub local: Store<K>,
    /// The remote objects (of any owner).
    pub remote_objects: Store<K>,
    ready: Arc<AtomicBool>,
    tasks: Vec<AbortHandle>,
}

impl<K: Reflect> Pair<K> {
    /// Whether both stores are listed.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

impl<K: Reflect> Drop for Pair<K> {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One kind's reflector (`E`: what the kind needs besides, its `Io::Extra`).
pub struct Reflector<K: Reflect, E> {
    /// The configuration.
    pub cfg: Arc<VkConfig>,
    /// The work queue (local namespace and name).
    pub queue: Arc<Queue<Key>>,
    /// The namespace pairs, by local namespace.
    pub pairs: RwLock<HashMap<String, Arc<Pair<K>>>>,
    /// Consecutive failures per key (for the retry delay).
    pub failures: Mutex<HashMap<Key, u32>>,
    /// Events on local objects.
    pub recorder: Recorder,
    /// What the kind needs besides (the EndpointSlices: the Services and the IPAM).
    pub extra: E,
    /// The node name (the provider's pods' endpoints are on it).
    pub node: String,
    /// The one name this kind handles, if it runs for one only (the root CA with ConfigMaps
    /// off).
    pub only: Option<&'static str>,
    /// What the remote store keeps of a remote object (all of it unless the kind says).
    pub trim: fn(&mut K),
}

impl<K: Reflect, E> Reflector<K, E> {
    /// A reflector with no namespace yet.
    pub fn new(cfg: Arc<VkConfig>, recorder: Recorder, extra: E) -> Self {
        let node = cfg.node_name();
        Reflector {
            cfg,
            queue: Arc::new(Queue::default()),
            pairs: RwLock::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            recorder,
            extra,
            node,
            only: None,
            trim: |_| {},
        }
    }

    /// The pair of local namespace `local`, if it is offloaded.
    pub fn pair(&self, local: &str) -> Option<Arc<Pair<K>>> {
        let pairs = self.pairs.read().unwrap_or_else(|p| p.into_inner());
        pairs.get(local).cloned()
    }

    /// The context of the pair `local` → `remote`.
    pub fn ctx<'a>(&'a self, local: &'a str, remote: &'a str) -> Ctx<'a> {
        Ctx {
            home: &self.cfg.home.cluster_id,
            foreign: &self.cfg.foreign.cluster_id,
            local_namespace: local,
            remote_namespace: remote,
            node: &self.node,
        }
    }

    /// Starts the watches of the namespaces newly offloaded (or offloaded elsewhere now) and
    /// stops those of the namespaces no longer offloaded (their copies go with the remote
    /// namespace); returns the latter.
    pub fn sync(&self, mapping: &Mapping) -> Vec<String> {
        let mut pairs = self.pairs.write().unwrap_or_else(|p| p.into_inner());
        let mut dropped = Vec::new();
        pairs.retain(|local, pair| {
            let keep = mapping.get(local) == Some(&pair.remote);
            if !keep {
                dropped.push(local.clone());
            }
            keep
        });
        for (local, remote) in mapping {
            if !pairs.contains_key(local) {
                tracing::debug!(kind = %K::KIND, %local, %remote, "reflecting namespace");
                pairs.insert(local.clone(), Arc::new(self.start(local, remote)));
            }
        }
        dropped
    }

    fn start(&self, local: &str, remote: &str) -> Pair<K> {
        let (local_store, local_writer) = reflector::store();
        let (remote_store, remote_writer) = reflector::store();
        let local_api: Api<K> = Api::namespaced(self.cfg.local.clone(), local);
        let remote_api: Api<K> = Api::namespaced(self.cfg.remote.watch.clone(), remote);
        let ready = Arc::new(AtomicBool::new(false));
        let local_key = {
            let local = local.to_owned();
            move |o: &K| {
                Some(Key {
                    namespace: local.clone(),
                    name: o.meta().name.clone()?,
                })
            }
        };
        let remote_key = {
            let (local, remote) = (local.to_owned(), remote.to_owned());
            let this = self.ctx_owned();
            move |o: &K| {
                let ctx = this.ctx(&local, &remote);
                let name = K::local_name(o.meta().name.as_deref()?, &ctx)?;
                Some(Key {
                    namespace: local.clone(),
                    name,
                })
            }
        };
        let config = watcher::Config::default();
        // One name only (the root CA): watched by name, which a role granting list and watch
        // on that name alone allows (an in-process virtual kubelet's, the manager's identity).
        let local_config = match self.only {
            Some(name) => config.clone().fields(&format!("metadata.name={name}")),
            None => config.clone(),
        };
        let t1 = tokio::spawn(feed(
            watcher(local_api, local_config)
                .default_backoff()
                .modify(|o| control::lean::meta(o.meta_mut())),
            local_writer,
            self.queue.clone(),
            local_key.clone(),
        ));
        let t2 = tokio::spawn(feed(
            watcher(remote_api, config)
                .default_backoff()
                .modify(self.trim)
                .modify(|o| control::lean::meta(o.meta_mut())),
            remote_writer,
            self.queue.clone(),
            remote_key.clone(),
        ));
        let t3 = tokio::spawn({
            let (l, r, ready, queue) = (
                local_store.clone(),
                remote_store.clone(),
                ready.clone(),
                self.queue.clone(),
            );
            async move {
                // The writers live in the tasks above, aborted together with this one.
                if l.wait_until_ready().await.is_err() || r.wait_until_ready().await.is_err() {
                    return;
                }
                ready.store(true, Ordering::Release);
                // Every key seen before both were listed was skipped: queue them all (a copy
                // whose local object is gone has only its remote name to queue it).
                let keys = l
                    .state()
                    .iter()
                    .filter_map(|o| local_key(o))
                    .chain(r.state().iter().filter_map(|o| remote_key(o)))
                    .collect::<Vec<_>>();
                for k in keys {
                    queue.add(k);
                }
            }
        });
        Pair {
            remote: remote.to_owned(),
            local: local_store,
            remote_objects: remote_store,
            ready,
            tasks: vec![t1.abort_handle(), t2.abort_handle(), t3.abort_handle()],
        }
    }

    fn ctx_owned(&self) -> Owned {
        Owned {
            home: self.cfg.home.cluster_id.clone(),
            foreign: self.cfg.foreign.cluster_id.clone(),
            node: self.node.clone(),
        }
    }
}

/// What a [`Ctx`] borrows, owned (for the watches' key functions).
#[derive(Clone)]
struct Owned {
    home: control::api::ClusterId,
    foreign: control::api::ClusterId,
    node: String,
}

impl Owned {
    fn ctx<'a>(&'a self, local: &'a str, remote: &'a str) -> Ctx<'a> {
        Ctx {
            home: &self.home,
            foreign: &self.foreign,
            local_namespace: local,
            remote_namespace: remote,
            node: &self.node,
        }
    }
}

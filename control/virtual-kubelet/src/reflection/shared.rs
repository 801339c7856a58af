//! What the watches and the workers of pod reflection share: the configuration, the queue, the
//! stores (local pods, and per mapped namespace the remote ones), the IP mapping and the
//! per-key bookkeeping.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock},
    time::{Duration, Instant},
};

use control::api::virtualkubelet::ShadowPod;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{events::Recorder, reflector::Store};

use control::shadowpod::reflection as decide;

use super::{
    ips,
    issued::Tokens,
    key::Key,
    mapped::{Namespace, NamespaceView},
    queue,
};
use crate::VkConfig;

/// What the watches and the workers share.
pub struct Shared {
    /// The configuration.
    pub cfg: Arc<VkConfig>,
    /// The work queue.
    pub queue: Arc<queue::Queue<Key>>,
    /// The local pods on the node.
    pub local: Store<Pod>,
    /// Per local namespace offloaded here, its remote namespace and stores.
    pub namespaces: RwLock<HashMap<String, Namespace>>,
    /// The remote pods each local pod saw replaced.
    pub restarts: Mutex<HashMap<Key, decide::Restarts>>,
    /// The IP mapping.
    pub ips: ips::Mapper,
    /// Consecutive failures per key (for the retry delay).
    pub failures: Mutex<HashMap<Key, u32>>,
    /// Events on local pods.
    pub recorder: Recorder,
    /// Per key, the UID of the ShadowPod whose remote name was looked up for a foreign Pod
    /// (once each).
    pub probed: Mutex<HashMap<Key, String>>,
    /// The ServiceAccount tokens written, per pod (shared with the token Secrets' watches,
    /// which forget a token whose Secret is deleted).
    pub tokens: Arc<Tokens>,
    /// The home API server as the provider's pods reach it, once found (API server support;
    /// asked again while the home cluster publishes no address).
    pub home_api: std::sync::OnceLock<control::shadowpod::token::HomeApi>,
    /// The ShadowPods this worker created that the remote store did not show yet
    /// ([`Created`]).
    pub created: Created,
}

/// How long a ShadowPod we created stands in for the store's copy: its watch event comes
/// within this (else the store is trusted again, e.g. if it was deleted meanwhile).
pub const CREATED_FOR: Duration = Duration::from_secs(30);

/// ShadowPods created and not yet seen in the remote store, per key: a key handled again
/// before the watch brings the new ShadowPod (the pod's next event comes first, as its label
/// is written) reads it from here, instead of creating it again, meeting 409 and GETting it.
#[derive(Default)]
pub struct Created(Mutex<HashMap<Key, (Instant, Arc<ShadowPod>)>>);

impl Created {
    /// `shadow` was created for `key` at `now`.
    pub fn insert(&self, key: &Key, shadow: ShadowPod, now: Instant) {
        self.lock().insert(key.clone(), (now, Arc::new(shadow)));
    }

    /// What the store shows for `key` (`stored`), or the ShadowPod created for it within
    /// [`CREATED_FOR`] while the store shows none. Once the store shows one, or the time is
    /// up, the record goes.
    pub fn or_stored(
        &self,
        key: &Key,
        stored: Option<Arc<ShadowPod>>,
        now: Instant,
    ) -> Option<Arc<ShadowPod>> {
        let mut map = self.lock();
        if stored.is_some() {
            map.remove(key);
            return stored;
        }
        match map.get(key) {
            Some((at, s)) if now.duration_since(*at) < CREATED_FOR => Some(s.clone()),
            Some(_) => {
                map.remove(key);
                None
            }
            None => None,
        }
    }

    /// Forgets `key`'s record.
    pub fn forget(&self, key: &Key) {
        self.lock().remove(key);
    }

    /// How many records are held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (Instant, Arc<ShadowPod>)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Shared {
    /// The remote namespace of `local` and its stores, if it is mapped.
    pub fn namespace(&self, local: &str) -> Option<NamespaceView> {
        let map = self.namespaces.read().unwrap_or_else(|p| p.into_inner());
        map.get(local).map(Namespace::view)
    }

    /// Forgets what is kept of pod `key` (it is gone, or no longer ours).
    pub fn forget(&self, key: &Key) {
        self.restarts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        self.ips.forget(key);
        self.probed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        self.tokens.drop_pod(key);
        self.created.forget(key);
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shadow(uid: &str) -> ShadowPod {
        let mut s = ShadowPod::new("p", Default::default());
        s.metadata.uid = Some(uid.into());
        s
    }

    #[test]
    fn a_created_shadowpod_stands_in_until_the_store_shows_one_or_the_time_is_up() {
        let c = Created::default();
        let key = Key {
            namespace: "ns".into(),
            name: "p".into(),
        };
        let t0 = Instant::now();
        assert!(c.or_stored(&key, None, t0).is_none(), "nothing created");
        c.insert(&key, shadow("made"), t0);
        let got = c.or_stored(&key, None, t0 + Duration::from_secs(1));
        assert_eq!(got.unwrap().metadata.uid.as_deref(), Some("made"));
        // The store's copy wins and ends the record.
        let stored = Arc::new(shadow("stored"));
        let got = c.or_stored(&key, Some(stored), t0 + Duration::from_secs(2));
        assert_eq!(got.unwrap().metadata.uid.as_deref(), Some("stored"));
        assert!(c.is_empty());
        assert!(
            c.or_stored(&key, None, t0 + Duration::from_secs(3))
                .is_none()
        );
        // Not seen within CREATED_FOR: the store is trusted again (deleted meanwhile).
        c.insert(&key, shadow("made"), t0);
        assert!(c.or_stored(&key, None, t0 + CREATED_FOR).is_none());
        assert!(c.is_empty());
        // Forgotten with its pod.
        c.insert(&key, shadow("made"), t0);
        c.forget(&key);
        assert!(c.is_empty());
    }
}

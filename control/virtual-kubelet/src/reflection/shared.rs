//! What the watches and the workers of pod reflection share: the configuration, the queue, the
//! stores (local pods, and per mapped namespace the remote ones), the IP mapping and the
//! per-key bookkeeping.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock},
};

use kube::runtime::{
    events::Recorder,
    reflector::{ObjectRef, Store},
};
use liqo_auth::compact::shrink;

use control::{
    lean::StoredPod,
    shadowpod::{pending::Pending, reflection as decide},
};
use k8s_openapi::api::core::v1::Pod;

use super::{
    created::Created,
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
    /// The local pods on the node (their specs compact).
    pub local: Store<StoredPod>,
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
    /// The ShadowPods the workers created or deleted that the remote store does not show so
    /// yet.
    pub created: Created,
    /// The writes to home pods the local store does not show yet.
    pub pending: Mutex<HashMap<Key, Pending>>,
}

impl Shared {
    /// The remote namespace of `local` and its stores, if it is mapped.
    pub fn namespace(&self, local: &str) -> Option<NamespaceView> {
        let map = self.namespaces.read().unwrap_or_else(|p| p.into_inner());
        map.get(local).map(Namespace::view)
    }

    /// The local pod of `key` as stored (its spec and status decoded), with our writes to it that the
    /// store does not show yet laid over it (`control::shadowpod::pending`: no second write of
    /// the same); the record of them is dropped once the store shows another version.
    pub fn stored_local(
        &self,
        key: &Key,
    ) -> Result<Option<Pod>, control::lean::CompactDecodeError> {
        let Some(mut pod) = self
            .local
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
            .map(|p| p.to_pod())
            .transpose()?
        else {
            return Ok(None);
        };
        let mut m = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        match m.get(key) {
            Some(p) if p.stands(&pod) => p.apply(&mut pod),
            Some(_) => {
                m.remove(key);
                shrink(&mut m);
            }
            None => {}
        }
        Ok(Some(pod))
    }

    /// Records a write to `key`'s pod made on version `stored`, which the API server answered
    /// with `written` (`what` names what was written). A write that changed nothing (the same
    /// version back: no event will come) is not recorded.
    pub fn record_pending(
        &self,
        key: &Key,
        stored: Option<&Pod>,
        written: &Pod,
        what: impl FnOnce(&mut Pending),
    ) {
        let Some(stored) = stored else { return };
        if written.metadata.resource_version == stored.metadata.resource_version {
            return;
        }
        let mut m = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let was = m.remove(key).unwrap_or_default();
        m.insert(key.clone(), was.after(stored, what));
    }

    /// Forgets what is kept of pod `key` (it is gone, or no longer ours).
    pub fn forget(&self, key: &Key) {
        {
            let mut m = self.restarts.lock().unwrap_or_else(|p| p.into_inner());
            m.remove(key);
            shrink(&mut m);
        }
        self.ips.forget(key);
        {
            let mut m = self.probed.lock().unwrap_or_else(|p| p.into_inner());
            m.remove(key);
            shrink(&mut m);
        }
        self.tokens.drop_pod(key);
        // A deletion's record stays: the deletion's event drops it (no second deletion of a
        // ShadowPod whose pod is gone while the watch lags).
        self.created.forget_created(key);
        {
            let mut m = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            m.remove(key);
            shrink(&mut m);
        }
        let mut m = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(key);
        shrink(&mut m);
    }
}

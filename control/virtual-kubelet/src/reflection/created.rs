//! ShadowPods the workers created that the remote store does not show yet ([`Created`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use control::api::virtualkubelet::ShadowPod;
use kube::api::PartialObjectMeta;

use super::key::Key;

/// How long a ShadowPod we created stands in for the store's copy: its watch event comes
/// within this. The key is handled again when the time is up, and the store trusted again
/// (e.g. if the ShadowPod was deleted before the store saw it).
pub const CREATED_FOR: Duration = Duration::from_secs(30);

/// A ShadowPod created for a key, in a remote namespace, at a time.
struct Record {
    at: Instant,
    namespace: String,
    shadow: Arc<PartialObjectMeta<ShadowPod>>,
}

/// ShadowPods created and not yet seen in the remote store, per key: a key handled again
/// before the watch brings the new ShadowPod (the pod's next event comes first, as its label
/// is written) reads it from here instead of creating it again, meeting 409 and GETting it.
#[derive(Default)]
pub struct Created(Mutex<HashMap<Key, Record>>);

/// What stands for a key's ShadowPod ([`Created::or_stored`]).
pub struct Standing {
    /// The store's copy, else the one created (if it stands in): its metadata, as the
    /// store keeps it.
    pub shadow: Option<Arc<PartialObjectMeta<ShadowPod>>>,
    /// When the created one stands in: handle the key again after this, once the record is
    /// due to go.
    pub recheck: Option<Duration>,
}

impl Created {
    /// `shadow` was created for `key` in remote `namespace` at `now` (kept as the store would
    /// keep it: `control::lean::shadow`).
    pub fn insert(&self, key: &Key, namespace: &str, shadow: ShadowPod, now: Instant) {
        let mut metadata = shadow.metadata;
        control::lean::shadow(&mut metadata);
        let record = Record {
            at: now,
            namespace: namespace.to_owned(),
            shadow: Arc::new(PartialObjectMeta {
                types: None,
                metadata,
                _phantom: Default::default(),
            }),
        };
        self.lock().insert(key.clone(), record);
    }

    /// What the store shows for `key` in remote `namespace` (`stored`), or the ShadowPod
    /// created there within [`CREATED_FOR`] while the store shows none. Once the store shows
    /// one, the time is up or the namespace is another, the record goes.
    pub fn or_stored(
        &self,
        key: &Key,
        namespace: &str,
        stored: Option<Arc<PartialObjectMeta<ShadowPod>>>,
        now: Instant,
    ) -> Standing {
        let mut map = self.lock();
        let gone = Standing {
            shadow: None,
            recheck: None,
        };
        if stored.is_some() {
            if map.remove(key).is_some() {
                liqo_auth::compact::shrink(&mut map);
            }
            return Standing {
                shadow: stored,
                ..gone
            };
        }
        let Some(r) = map.get(key) else { return gone };
        let age = now.saturating_duration_since(r.at);
        if r.namespace != namespace || age >= CREATED_FOR {
            map.remove(key);
            liqo_auth::compact::shrink(&mut map);
            return gone;
        }
        Standing {
            shadow: Some(r.shadow.clone()),
            recheck: Some(CREATED_FOR - age),
        }
    }

    /// Forgets `key`'s record (its pod is gone, or its ShadowPod is being deleted).
    pub fn forget(&self, key: &Key) {
        let mut m = self.lock();
        m.remove(key);
        liqo_auth::compact::shrink(&mut m);
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Record>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
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

    fn uid(s: &Standing) -> Option<&str> {
        s.shadow.as_ref()?.metadata.uid.as_deref()
    }

    #[test]
    fn a_created_shadowpod_stands_in_until_the_store_shows_one_or_the_time_is_up() {
        let c = Created::default();
        let key = Key {
            namespace: "ns".into(),
            name: "p".into(),
        };
        let t0 = Instant::now();
        let s = c.or_stored(&key, "remote", None, t0);
        assert!(s.shadow.is_none() && s.recheck.is_none(), "nothing created");
        c.insert(&key, "remote", shadow("made"), t0);
        let s = c.or_stored(&key, "remote", None, t0 + Duration::from_secs(1));
        assert_eq!(uid(&s), Some("made"));
        assert_eq!(s.recheck, Some(CREATED_FOR - Duration::from_secs(1)));
        // The store's copy wins and ends the record.
        let stored = Some(Arc::new(PartialObjectMeta {
            types: None,
            metadata: shadow("stored").metadata,
            _phantom: Default::default(),
        }));
        let s = c.or_stored(&key, "remote", stored, t0 + Duration::from_secs(2));
        assert_eq!((uid(&s), s.recheck), (Some("stored"), None));
        assert!(c.is_empty());
        // Not seen within CREATED_FOR: the store is trusted again (deleted meanwhile).
        c.insert(&key, "remote", shadow("made"), t0);
        assert!(
            c.or_stored(&key, "remote", None, t0 + CREATED_FOR)
                .shadow
                .is_none()
        );
        assert!(c.is_empty());
        // Another remote namespace (the namespace mapped again): not this record.
        c.insert(&key, "remote", shadow("made"), t0);
        assert!(c.or_stored(&key, "other", None, t0).shadow.is_none());
        assert!(c.is_empty());
        // Forgotten with its pod, or as its ShadowPod is deleted.
        c.insert(&key, "remote", shadow("made"), t0);
        c.forget(&key);
        assert!(c.is_empty());
    }
}

//! ShadowPods the workers created or deleted that the remote store does not show so yet
//! ([`Created`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use control::api::virtualkubelet::ShadowPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PartialObjectMeta;

use super::key::Key;

/// How long a ShadowPod we created (or deleted) stands in for the store's view: its watch
/// event comes within this. The key is handled again when the time is up, and the store
/// trusted again (e.g. if the ShadowPod was deleted before the store saw it).
pub const CREATED_FOR: Duration = Duration::from_secs(30);

/// What a worker did to a key's ShadowPod.
enum Made {
    /// Created it (kept as the store would keep it).
    Created(Arc<PartialObjectMeta<ShadowPod>>),
    /// Deleted the one of this UID, at this time.
    Deleted { uid: String, at: Time },
}

/// A write to a key's ShadowPod in a remote namespace, at a time.
struct Record {
    at: Instant,
    namespace: String,
    made: Made,
}

/// ShadowPods created or deleted and not yet shown so by the remote store, per key: a key
/// handled again before the watch brings the change (the pod's next event comes first)
/// reads it from here instead of creating the ShadowPod again (meeting 409 and GETting it)
/// or deleting it a second time.
#[derive(Default)]
pub struct Created(Mutex<HashMap<Key, Record>>);

/// What stands for a key's ShadowPod ([`Created::or_stored`]).
pub struct Standing {
    /// The store's copy (marked deleted while our deletion stands in), else the one created
    /// (if it stands in): its metadata, as the store keeps it.
    pub shadow: Option<Arc<PartialObjectMeta<ShadowPod>>>,
    /// When a record stands in: handle the key again after this, once it is due to go.
    pub recheck: Option<Duration>,
}

impl Created {
    /// `shadow` was created for `key` in remote `namespace` at `now` (kept as the store would
    /// keep it: `control::lean::shadow`).
    pub fn insert(&self, key: &Key, namespace: &str, shadow: ShadowPod, now: Instant) {
        let mut metadata = shadow.metadata;
        control::lean::shadow(&mut metadata);
        let made = Made::Created(Arc::new(PartialObjectMeta {
            types: None,
            metadata,
            _phantom: Default::default(),
        }));
        self.record(key, namespace, made, now);
    }

    /// `key`'s ShadowPod of `uid` in remote `namespace` was deleted at `now` (`at` as the API
    /// server would stamp it): until the store shows it going, its copy there is seen going.
    pub fn deleted(&self, key: &Key, namespace: &str, uid: String, at: Time, now: Instant) {
        self.record(key, namespace, Made::Deleted { uid, at }, now);
    }

    fn record(&self, key: &Key, namespace: &str, made: Made, now: Instant) {
        let record = Record {
            at: now,
            namespace: namespace.to_owned(),
            made,
        };
        self.lock().insert(key.clone(), record);
    }

    /// What the store shows for `key` in remote `namespace` (`stored`), with what a record
    /// made within [`CREATED_FOR`] in that namespace the store does not show yet: the one
    /// created while the store shows none, the stored one of a UID we deleted as deleted
    /// while the store shows it live. Once the store shows the change, the time is up or the
    /// namespace is another, the record goes.
    pub fn or_stored(
        &self,
        key: &Key,
        namespace: &str,
        stored: Option<Arc<PartialObjectMeta<ShadowPod>>>,
        now: Instant,
    ) -> Standing {
        let mut map = self.lock();
        let standing = map.get(key).and_then(|r| {
            let age = now.saturating_duration_since(r.at);
            if r.namespace != namespace || age >= CREATED_FOR {
                return None;
            }
            let shadow = match (&r.made, &stored) {
                (Made::Created(made), None) => made.clone(),
                (Made::Deleted { uid, at }, Some(s))
                    if s.metadata.uid.as_ref() == Some(uid)
                        && s.metadata.deletion_timestamp.is_none() =>
                {
                    let mut going = (**s).clone();
                    going.metadata.deletion_timestamp = Some(at.clone());
                    Arc::new(going)
                }
                _ => return None,
            };
            Some(Standing {
                shadow: Some(shadow),
                recheck: Some(CREATED_FOR - age),
            })
        });
        if let Some(standing) = standing {
            return standing;
        }
        if map.remove(key).is_some() {
            liqo_auth::compact::shrink(&mut map);
        }
        Standing {
            shadow: stored,
            recheck: None,
        }
    }

    /// Forgets `key`'s record (its ShadowPod was gone already, or could not be deleted).
    pub fn forget(&self, key: &Key) {
        let mut m = self.lock();
        m.remove(key);
        liqo_auth::compact::shrink(&mut m);
    }

    /// Forgets `key`'s record of a creation (its pod is gone); one of a deletion stays until
    /// [`or_stored`](Self::or_stored) sees the store show it (the deletion's event handles the
    /// key again) or its time is up.
    pub fn forget_created(&self, key: &Key) {
        let mut m = self.lock();
        if m.get(key)
            .is_some_and(|r| matches!(r.made, Made::Created(_)))
        {
            m.remove(key);
            liqo_auth::compact::shrink(&mut m);
        }
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
        // Forgotten as its ShadowPod is found gone, or with its pod.
        c.insert(&key, "remote", shadow("made"), t0);
        c.forget(&key);
        assert!(c.is_empty());
        c.insert(&key, "remote", shadow("made"), t0);
        c.forget_created(&key);
        assert!(c.is_empty());
    }

    fn stored(uid: &str, deleting: bool) -> Option<Arc<PartialObjectMeta<ShadowPod>>> {
        let mut metadata = shadow(uid).metadata;
        if deleting {
            metadata.deletion_timestamp = Some(at());
        }
        Some(Arc::new(PartialObjectMeta {
            types: None,
            metadata,
            _phantom: Default::default(),
        }))
    }

    fn at() -> Time {
        Time("2026-11-30T21:00:00Z".parse().unwrap())
    }

    fn going(s: &Standing) -> bool {
        s.shadow
            .as_ref()
            .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    }

    #[test]
    fn a_deleted_shadowpod_is_seen_going_until_the_store_shows_it_so() {
        let c = Created::default();
        let key = Key {
            namespace: "ns".into(),
            name: "p".into(),
        };
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        c.deleted(&key, "remote", "u1".into(), at(), t0);
        // The store still shows it live: seen going, handled again once the record is due.
        let s = c.or_stored(&key, "remote", stored("u1", false), t1);
        assert!(going(&s) && uid(&s) == Some("u1"), "seen going");
        assert_eq!(s.recheck, Some(CREATED_FOR - Duration::from_secs(1)));
        assert!(!c.is_empty());
        // Another UID (a new ShadowPod): the record does not touch it, and goes.
        let s = c.or_stored(&key, "remote", stored("u2", false), t1);
        assert!(!going(&s) && uid(&s) == Some("u2") && s.recheck.is_none());
        assert!(c.is_empty());
        // Its pod gone (its records forgotten): the deletion's record stays, for the watch.
        c.deleted(&key, "remote", "u1".into(), at(), t0);
        c.forget_created(&key);
        assert!(going(&c.or_stored(&key, "remote", stored("u1", false), t1)));
        // The store shows it going, or gone: the record goes.
        c.deleted(&key, "remote", "u1".into(), at(), t0);
        assert!(going(&c.or_stored(&key, "remote", stored("u1", true), t1)));
        assert!(c.is_empty());
        c.deleted(&key, "remote", "u1".into(), at(), t0);
        assert!(c.or_stored(&key, "remote", None, t1).shadow.is_none());
        assert!(c.is_empty());
        // Past CREATED_FOR, or in another namespace: the store is trusted.
        c.deleted(&key, "remote", "u1".into(), at(), t0);
        assert!(!going(&c.or_stored(
            &key,
            "remote",
            stored("u1", false),
            t0 + CREATED_FOR
        )));
        assert!(c.is_empty());
        c.deleted(&key, "remote", "u1".into(), at(), t0);
        assert!(!going(&c.or_stored(&key, "other", stored("u1", false), t1)));
        assert!(c.is_empty());
    }
}

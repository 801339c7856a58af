//! The ServiceAccount tokens written, per pod ([`Tokens`]), shared by the workers (which write
//! them) and the token Secrets' watches (which forget a token whose Secret is deleted). Each
//! pod's entry carries a generation that a forget moves on: a worker notes it before asking
//! for a token and records the token only if no deletion came in between (else the deletion
//! would be lost and the Secret stay gone until the renewal).

use std::{collections::HashMap, sync::Mutex};

use k8s_openapi::jiff::Timestamp;

use super::key::Key;

/// A token written for a pod: for which ShadowPod, and when it is renewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The ShadowPod the token Secret belongs to.
    pub shadow_uid: String,
    /// The home pod the token is bound to.
    pub pod_uid: String,
    /// When the token is renewed.
    pub renew_at: Timestamp,
}

/// A pod's entry.
#[derive(Debug)]
struct Entry {
    /// Moved on by every forget (from one counter: never the same twice).
    generation: u64,
    /// The token written since, if any.
    issued: Option<Issued>,
}

#[derive(Debug, Default)]
struct State {
    /// The last generation handed out.
    last: u64,
    entries: HashMap<Key, Entry>,
}

impl State {
    fn next(&mut self) -> u64 {
        self.last += 1;
        self.last
    }
}

/// The tokens written, per pod.
#[derive(Debug, Default)]
pub struct Tokens(Mutex<State>);

/// What [`Tokens::begin`] found: the token written, and the generation to record a new one
/// with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begun {
    /// The generation [`Tokens::record`] compares.
    pub generation: u64,
    /// The token written, if it was not forgotten since.
    pub issued: Option<Issued>,
}

impl Tokens {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called by the worker of `key` before it looks at (or asks for) a token.
    pub fn begin(&self, key: &Key) -> Begun {
        let mut state = self.state();
        if let Some(e) = state.entries.get(key) {
            return Begun {
                generation: e.generation,
                issued: e.issued.clone(),
            };
        }
        let generation = state.next();
        state.entries.insert(
            key.clone(),
            Entry {
                generation,
                issued: None,
            },
        );
        Begun {
            generation,
            issued: None,
        }
    }

    /// Records the token written for `key` unless it was forgotten (or dropped) since
    /// [`Tokens::begin`] returned `generation`; whether it was recorded.
    pub fn record(&self, key: &Key, generation: u64, issued: Issued) -> bool {
        let mut state = self.state();
        match state.entries.get_mut(key) {
            Some(e) if e.generation == generation => {
                e.issued = Some(issued);
                true
            }
            _ => false,
        }
    }

    /// The token Secret of `key` is gone: its token is forgotten, and one being written is not
    /// recorded. (No entry: no worker has begun since the pod was dropped, nothing to do.)
    pub fn forget(&self, key: &Key) {
        let mut state = self.state();
        let generation = state.next();
        if let Some(e) = state.entries.get_mut(key) {
            e.generation = generation;
            e.issued = None;
        }
    }

    /// The pod is gone: its entry is dropped.
    pub fn drop_pod(&self, key: &Key) {
        let mut state = self.state();
        state.entries.remove(key);
        liqo_auth::compact::shrink(&mut state.entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key {
            namespace: "demo".into(),
            name: "web-1".into(),
        }
    }

    fn issued() -> Issued {
        Issued {
            shadow_uid: "s".into(),
            pod_uid: "p".into(),
            renew_at: Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_token_written_is_found_by_the_next_run() {
        let t = Tokens::default();
        let b = t.begin(&key());
        assert_eq!(b.issued, None);
        assert!(t.record(&key(), b.generation, issued()));
        assert_eq!(t.begin(&key()).issued, Some(issued()));
    }

    #[test]
    fn a_deletion_while_the_token_is_written_is_not_lost() {
        let t = Tokens::default();
        let b = t.begin(&key());
        // The Secret is written, its deletion seen before the worker records it.
        t.forget(&key());
        assert!(!t.record(&key(), b.generation, issued()));
        assert_eq!(t.begin(&key()).issued, None, "the next run writes it again");
    }

    #[test]
    fn a_deletion_forgets_a_recorded_token() {
        let t = Tokens::default();
        let b = t.begin(&key());
        assert!(t.record(&key(), b.generation, issued()));
        t.forget(&key());
        let again = t.begin(&key());
        assert_eq!(again.issued, None);
        assert_ne!(again.generation, b.generation);
        assert!(t.record(&key(), again.generation, issued()));
    }

    #[test]
    fn a_pod_dropped_meanwhile_records_nothing_and_leaves_no_entry() {
        let t = Tokens::default();
        let b = t.begin(&key());
        t.drop_pod(&key());
        assert!(!t.record(&key(), b.generation, issued()));
        // A deletion of a gone pod's Secret (its ShadowPod's garbage) keeps nothing.
        t.forget(&key());
        assert!(t.state().entries.is_empty());
        let again = t.begin(&key());
        assert_ne!(again.generation, b.generation, "never the same twice");
    }
}

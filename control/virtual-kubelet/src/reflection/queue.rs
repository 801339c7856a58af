//! A keyed work queue (as client-go's): a key queued twice is handled once; a key added while
//! a worker handles it is handled again after (never by two workers at once); keys can be
//! added after a delay (retries). No tasks of its own: the delays are waited for by the
//! workers in [`Queue::next`].

use std::{
    collections::{HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::Mutex,
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

/// The queue.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
}

struct State<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    active: HashSet<K>,
    dirty: HashSet<K>,
    delayed: HashMap<K, Instant>,
}

impl<K: Clone + Eq + Hash> Default for Queue<K> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                active: HashSet::new(),
                dirty: HashSet::new(),
                delayed: HashMap::new(),
            }),
            notify: Notify::new(),
        }
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    fn push(&mut self, key: K) -> bool {
        if self.active.contains(&key) {
            self.dirty.insert(key);
            return false;
        }
        if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
            return true;
        }
        false
    }

    fn promote(&mut self, now: Instant) {
        let due: Vec<K> = self
            .delayed
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            self.delayed.remove(&k);
            self.push(k);
        }
    }
}

impl<K: Clone + Eq + Hash> Queue<K> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // Every update leaves the sets consistent: a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` now.
    pub fn add(&self, key: K) {
        if self.state().push(key) {
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay` (the earliest of several delayed adds wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        let at = Instant::now() + delay;
        {
            let mut s = self.state();
            let entry = s.delayed.entry(key).or_insert(at);
            *entry = (*entry).min(at);
        }
        // A waiting worker recomputes its deadline.
        self.notify.notify_one();
    }

    /// The next key to handle (waiting for one); call [`Queue::done`] after handling it.
    pub async fn next(&self) -> K {
        loop {
            let deadline = {
                let mut s = self.state();
                s.promote(Instant::now());
                if let Some(k) = s.ready.pop_front() {
                    s.queued.remove(&k);
                    s.active.insert(k.clone());
                    let more = !s.ready.is_empty();
                    drop(s);
                    if more {
                        // Another waiting worker takes the rest.
                        self.notify.notify_one();
                    }
                    return k;
                }
                s.delayed.values().min().copied()
            };
            let notified = self.notify.notified();
            match deadline {
                // Timing out is the point: a delayed key is due.
                Some(at) => drop(tokio::time::timeout_at(at, notified).await),
                None => notified.await,
            }
        }
    }

    /// `key` is handled: queued again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let again = {
            let mut s = self.state();
            s.active.remove(key);
            s.dirty.remove(key) && s.push(key.clone())
        };
        if again {
            self.notify.notify_one();
        }
    }

    /// Keys queued or delayed (not those being handled).
    pub fn len(&self) -> usize {
        let s = self.state();
        s.ready.len() + s.delayed.len()
    }

    /// Whether nothing is queued or delayed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_key_queued_twice_is_handled_once() {
        let q = Queue::default();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, "a");
        assert_eq!(q.next().await, "b");
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_active_comes_back_after_done_only() {
        let q = Queue::default();
        q.add("a");
        let k = q.next().await;
        q.add("a");
        q.add("b");
        // "a" is active: only "b" is ready.
        assert_eq!(q.next().await, "b");
        assert!(q.is_empty());
        q.done(&k);
        assert_eq!(q.next().await, "a");
    }

    #[tokio::test]
    async fn delayed_keys_come_when_due_and_the_earliest_delay_wins() {
        let q = Arc::new(Queue::default());
        let start = Instant::now();
        q.add_after("late", Duration::from_millis(400));
        q.add_after("soon", Duration::from_millis(100));
        q.add_after("soon", Duration::from_millis(300));
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, "soon");
        let t = start.elapsed();
        assert!(
            t >= Duration::from_millis(100) && t < Duration::from_millis(300),
            "{t:?}"
        );
        assert_eq!(q.next().await, "late");
        assert!(start.elapsed() >= Duration::from_millis(400));
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_on_add() {
        let q = Arc::new(Queue::default());
        let w = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!w.is_finished());
        q.add("x");
        let got = tokio::time::timeout(Duration::from_secs(5), w).await;
        assert_eq!(got.unwrap().unwrap(), "x");
    }
}

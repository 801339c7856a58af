//! A keyed work queue (as client-go's): a key queued twice is handled once; a key added while
//! a worker handles it is handled again after (never by two workers at once); keys can be
//! added after a delay (retries). No tasks of its own: the delays are waited for by the
//! workers in [`Queue::next`]. It times what it holds: how long keys waited and how long
//! workers took ([`Queue::take_stats`]).

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use liqo_auth::compact;
use tokio::{sync::Notify, time::Instant};

/// The queue.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    /// Workers in [`Queue::next`] now.
    waiting: AtomicUsize,
}

/// Counts a worker in [`Queue::next`] until dropped (also when its future is).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct State<K> {
    ready: VecDeque<K>,
    /// Queued keys, with when each became ready.
    queued: HashMap<K, Instant>,
    /// Keys being handled, with when each was taken.
    active: HashMap<K, Instant>,
    dirty: HashSet<K>,
    /// Delayed keys, with when each is due and its place in `due`.
    delayed: HashMap<K, (Instant, u64)>,
    /// The same keys by when they are due (the number orders keys due at once): the next due
    /// is the first, without a pass over them all.
    due: BTreeMap<(Instant, u64), K>,
    /// The next number of `due`.
    seq: u64,
    stats: Totals,
}

/// Keys handled and times summed since the last [`Queue::take_stats`].
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    taken: u64,
    handled: u64,
    wait: Duration,
    wait_max: Duration,
    busy: Duration,
    busy_max: Duration,
}

/// What the queue did since the last [`Queue::take_stats`], and holds now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Keys ready now.
    pub queued: usize,
    /// Keys waiting for a delay now.
    pub delayed: usize,
    /// Keys being handled now.
    pub active: usize,
    /// Workers waiting for a key now.
    pub idle: usize,
    /// The longest a key ready now has waited.
    pub oldest: Duration,
    /// Keys handled since.
    pub handled: u64,
    /// Mean and longest time a key taken by a worker since had waited, ready.
    pub wait_mean: Duration,
    pub wait_max: Duration,
    /// Mean and longest time a worker took on a key handled since.
    pub busy_mean: Duration,
    pub busy_max: Duration,
}

impl<K: Clone + Eq + Hash> Default for Queue<K> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashMap::new(),
                active: HashMap::new(),
                dirty: HashSet::new(),
                delayed: HashMap::new(),
                due: BTreeMap::new(),
                seq: 0,
                stats: Totals::default(),
            }),
            notify: Notify::new(),
            waiting: AtomicUsize::new(0),
        }
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    fn push(&mut self, key: K, now: Instant) -> bool {
        if self.active.contains_key(&key) {
            self.dirty.insert(key);
            return false;
        }
        match self.queued.entry(key.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(now);
                self.ready.push_back(key);
                true
            }
        }
    }

    fn promote(&mut self, now: Instant) {
        let mut any = false;
        while let Some(entry) = self.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let k = entry.remove();
            self.delayed.remove(&k);
            self.push(k, now);
            any = true;
        }
        if any {
            compact::shrink(&mut self.delayed);
        }
    }

    /// `key` due at `at`, unless it is due earlier already.
    fn delay(&mut self, key: K, at: Instant) {
        if let Some(&(was, n)) = self.delayed.get(&key) {
            if was <= at {
                return;
            }
            self.due.remove(&(was, n));
        }
        self.seq += 1;
        self.delayed.insert(key.clone(), (at, self.seq));
        self.due.insert((at, self.seq), key);
    }

    /// When the next delayed key is due.
    fn next_due(&self) -> Option<Instant> {
        self.due.first_key_value().map(|((at, _), _)| *at)
    }
}

impl<K: Clone + Eq + Hash> Queue<K> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // Every update leaves the sets consistent: a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` now.
    pub fn add(&self, key: K) {
        if self.state().push(key, Instant::now()) {
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay` (the earliest of several delayed adds wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        let at = Instant::now() + delay;
        self.state().delay(key, at);
        // A waiting worker recomputes its deadline.
        self.notify.notify_one();
    }

    /// The next key to handle (waiting for one); call [`Queue::done`] after handling it.
    pub async fn next(&self) -> K {
        let _waiting = Waiting::new(&self.waiting);
        loop {
            let deadline = {
                let mut s = self.state();
                let now = Instant::now();
                s.promote(now);
                if let Some(k) = s.ready.pop_front() {
                    let waited = s.queued.remove(&k).map_or(Duration::ZERO, |t| now - t);
                    compact::shrink(&mut s.queued);
                    if compact::due(s.ready.capacity(), s.ready.len()) {
                        let len = s.ready.len();
                        s.ready.shrink_to(len * 2);
                    }
                    s.stats.taken += 1;
                    s.stats.wait += waited;
                    s.stats.wait_max = s.stats.wait_max.max(waited);
                    s.active.insert(k.clone(), now);
                    let more = !s.ready.is_empty();
                    drop(s);
                    if more {
                        // Another waiting worker takes the rest.
                        self.notify.notify_one();
                    }
                    return k;
                }
                s.next_due()
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
            let now = Instant::now();
            if let Some(taken) = s.active.remove(key) {
                let busy = now - taken;
                s.stats.handled += 1;
                s.stats.busy += busy;
                s.stats.busy_max = s.stats.busy_max.max(busy);
            }
            let dirty = s.dirty.remove(key);
            compact::shrink_set(&mut s.dirty);
            dirty && s.push(key.clone(), now)
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

    /// What it holds now and did since the last call (which starts a new count).
    pub fn take_stats(&self) -> Stats {
        let mut s = self.state();
        let now = Instant::now();
        let t = std::mem::take(&mut s.stats);
        let per = |sum: Duration, n: u64| sum / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        Stats {
            queued: s.ready.len(),
            delayed: s.delayed.len(),
            active: s.active.len(),
            idle: self.waiting.load(Ordering::Relaxed),
            oldest: s
                .ready
                .front()
                .and_then(|k| s.queued.get(k))
                .map_or(Duration::ZERO, |t| now - *t),
            handled: t.handled,
            wait_mean: per(t.wait, t.taken),
            wait_max: t.wait_max,
            busy_mean: per(t.busy, t.handled),
            busy_max: t.busy_max,
        }
    }

    /// Whether nothing is queued or delayed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;

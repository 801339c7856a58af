//! A keyed work queue (as client-go's): a key queued twice is handled once; a key added while
//! a worker handles it is handled again after (never by two workers at once); keys can be
//! added after a delay (retries). No tasks of its own: the delays are waited for by the
//! workers in [`Queue::next`]. It times what it holds: how long keys waited and how long
//! workers took ([`Queue::take_stats`]).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::Mutex,
    time::Duration,
};

use liqo_auth::compact;
use tokio::{sync::Notify, time::Instant};

/// The queue.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    /// Workers in [`Queue::next`] now.
    waiting: std::sync::atomic::AtomicUsize,
}

/// Counts a worker in [`Queue::next`] until dropped (also when its future is).
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

struct State<K> {
    ready: VecDeque<K>,
    /// Queued keys, with when each became ready.
    queued: HashMap<K, Instant>,
    /// Keys being handled, with when each was taken.
    active: HashMap<K, Instant>,
    dirty: HashSet<K>,
    delayed: HashMap<K, Instant>,
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
                stats: Totals::default(),
            }),
            notify: Notify::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
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
        let due: Vec<K> = self
            .delayed
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            self.delayed.remove(&k);
            self.push(k, now);
        }
        compact::shrink(&mut self.delayed);
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
            let now = Instant::now();
            compact::shrink_set(&mut s.dirty);
            if let Some(taken) = s.active.remove(key) {
                let busy = now - taken;
                s.stats.handled += 1;
                s.stats.busy += busy;
                s.stats.busy_max = s.stats.busy_max.max(busy);
            }
            s.dirty.remove(key) && s.push(key.clone(), now)
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
            idle: self.waiting.load(std::sync::atomic::Ordering::Relaxed),
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

    #[tokio::test(start_paused = true)]
    async fn stats_time_the_wait_and_the_work() {
        let q = Queue::default();
        q.add("a");
        q.add("b");
        tokio::time::advance(Duration::from_millis(300)).await;
        let s = q.take_stats();
        assert_eq!((s.queued, s.active, s.handled), (2, 0, 0));
        assert_eq!(s.oldest, Duration::from_millis(300));
        let a = q.next().await;
        tokio::time::advance(Duration::from_millis(100)).await;
        q.done(&a);
        let b = q.next().await;
        tokio::time::advance(Duration::from_millis(50)).await;
        let s = q.take_stats();
        assert_eq!((s.queued, s.active, s.handled), (0, 1, 1));
        // "a" waited 300 ms, "b" 400 ms; "a" took 100 ms.
        assert_eq!(s.wait_max, Duration::from_millis(400));
        assert_eq!(s.wait_mean, Duration::from_millis(350));
        assert_eq!(s.busy_max, Duration::from_millis(100));
        q.done(&b);
        let s = q.take_stats();
        assert_eq!((s.handled, s.wait_max), (1, Duration::ZERO));
        assert_eq!(s.busy_mean, Duration::from_millis(50));
    }

    /// Ten workers on a burst of keys, delayed keys pending: all ten work at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_keeps_every_worker_busy() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let q = Arc::new(Queue::default());
        for i in 0..500 {
            q.add_after(format!("later-{i}"), Duration::from_secs(60 + i));
        }
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for _ in 0..10 {
            let (q, now, most) = (q.clone(), now.clone(), most.clone());
            tokio::spawn(async move {
                loop {
                    let k = q.next().await;
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    q.done(&k);
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let start = std::time::Instant::now();
        for i in 0..200 {
            q.add(format!("k-{i}"));
            if i % 20 == 0 {
                tokio::task::yield_now().await;
            }
        }
        while q.take_stats().queued > 0 || now.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let took = start.elapsed();
        assert!(most.load(Ordering::SeqCst) >= 8, "{most:?} at most at once");
        assert!(
            took < Duration::from_millis(1500),
            "{took:?} for 200 keys of 20 ms"
        );
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

//! The queue's tests.

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

/// Ten workers on a burst of keys, delayed keys pending: all ten work at once (on the
/// paused clock: 200 keys of 20 ms by ten take 400 ms).
#[tokio::test(start_paused = true)]
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
    let start = Instant::now();
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

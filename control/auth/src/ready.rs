//! A reflector store's readiness that any number of tasks can wait for.
//!
//! Why: kube's `Store::wait_until_ready` (kube-runtime 5) polls a oneshot receiver that keeps
//! one waker. Of several tasks waiting at once, only the last to poll is woken when the store
//! has listed; the others wait forever. Ten pod reflection workers started before the first
//! list ran as one. Here the wait is a shared future, which wakes every task waiting on it.
//!
//! It never reads or writes the store, and needs no runtime of its own (no task is spawned).

use futures::{
    FutureExt,
    future::{BoxFuture, Shared},
};
use kube::runtime::reflector::{Lookup, Store};

/// Resolves `true` once the store has listed, `false` if its writer was dropped before.
/// Clone it for every waiter.
pub type Listed = Shared<BoxFuture<'static, bool>>;

/// Whether `store` has listed, for any number of waiters.
pub fn shared<K>(store: &Store<K>) -> Listed
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let store = store.clone();
    async move { store.wait_until_ready().await.is_ok() }
        .boxed()
        .shared()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{reflector, watcher};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiter_wakes_when_the_store_has_listed() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let listed = shared(&store);
        let waiters: Vec<_> = (0..10).map(|_| tokio::spawn(listed.clone())).collect();
        // Every waiter has polled (and parked) before the store lists.
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        for w in waiters {
            let woke = tokio::time::timeout(Duration::from_secs(5), w).await;
            assert!(matches!(woke, Ok(Ok(true))), "{woke:?}");
        }
        // A late waiter gets it at once.
        assert!(listed.clone().now_or_never().unwrap());
    }

    #[tokio::test]
    async fn a_writer_dropped_before_listing_gives_false() {
        let (store, writer) = reflector::store::<ConfigMap>();
        let listed = shared(&store);
        drop(writer);
        let got = tokio::time::timeout(Duration::from_secs(5), listed).await;
        assert_eq!(got.ok(), Some(false));
    }
}

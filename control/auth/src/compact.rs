//! Memory given back after a burst: reflector stores and maps that shrink once most of what
//! they held is deleted (the rule, and the maps' shrink: `control::lean::shrink`, re-exported).
//!
//! Why: a hash map never shrinks as entries are removed. A store that held ten thousand pods
//! keeps the table of ten thousand after they are all deleted (kube's store is rebuilt only by
//! a re-list), and so does every per-pod map beside it. Here a store is rebuilt, locally (no
//! request), once it holds at most a quarter of the most it held since it was last built; a
//! map is shrunk to twice its size once it is at most a quarter full. Each costs one pass over
//! what is left, after at least as many deletions: constant time per deletion.
//!
//! It never reads the API server (a rebuild feeds the writer the objects its store holds) and
//! never changes what a store holds, only the memory it takes.

use std::hash::Hash;

use futures::{Stream, StreamExt};
use kube::runtime::{
    reflector::{Lookup, Store, store::Writer},
    watcher,
};

pub use control::lean::shrink::{MIN_PEAK, due, shrink, shrink_set};

/// Objects per page of the (re-)lists of watches of per-pod objects (pods, ShadowPods,
/// Events, pods' token Secrets): kube reads a page whole, as text, and decodes it before any
/// object is stripped, so a page of kube's default 500 full pods is several MiB at once, and
/// after a virtual kubelet's restart its allocator kept the spread of that peak. A page of 100
/// is a fifth of it, for four more requests per 500 objects. (A page size binds the API
/// server only for lists of the most recent state, kube's default `ListSemantic`.)
pub const LIST_PAGE: u32 = 100;

/// kube's watcher configuration with [`LIST_PAGE`] (selectors are added on it).
pub fn listing() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE)
}

/// As kube's `reflector` (`WatchStreamExt::reflect`): applies every event to `writer`'s
/// store and passes it on; after a deletion that leaves the store [`due`], rebuilds it. A
/// writer made with a dispatcher (shared streams) is not for this: nothing is dispatched.
pub fn reflect<K, S>(stream: S, mut writer: Writer<K>) -> impl Stream<Item = S::Item>
where
    K: Lookup + Clone,
    K::DynamicType: Eq + Hash + Clone,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    let reader = writer.as_reader();
    let mut peak = 0;
    // Between a list's Init and InitDone the writer's buffer holds the list: a rebuild (which
    // uses that buffer) waits until it is done. kube's watcher sends no deletion then.
    let mut listing = false;
    stream.map(move |event| {
        if let Ok(ev) = &event {
            writer.apply_watcher_event(ev);
            let len = reader.len();
            match ev {
                watcher::Event::Init => listing = true,
                watcher::Event::Delete(_) if !listing && due(peak, len) => {
                    rebuild(&mut writer, &reader);
                    peak = len;
                }
                // A list built the store afresh.
                watcher::Event::InitDone => {
                    listing = false;
                    peak = len;
                }
                _ => peak = peak.max(len),
            }
        }
        event
    })
}

/// The store built afresh from what it holds (the same objects, a table of their number).
fn rebuild<K>(writer: &mut Writer<K>, reader: &Store<K>)
where
    K: Lookup + Clone,
    K::DynamicType: Eq + Hash + Clone,
{
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in reader.state() {
        writer.apply_watcher_event(&watcher::Event::InitApply(K::clone(&o)));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
    use kube::runtime::reflector::{self, ObjectRef};

    use super::*;

    fn cm(i: usize) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("cm-{i}")),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[tokio::test]
    async fn a_store_emptied_by_deletions_is_rebuilt_with_what_is_left() {
        let (reader, writer) = reflector::store::<ConfigMap>();
        let n = 4 * MIN_PEAK;
        let mut events = vec![watcher::Event::Init];
        events.extend((0..n).map(|i| watcher::Event::InitApply(cm(i))));
        events.push(watcher::Event::InitDone);
        let mut deletions: Vec<_> = (0..n - 10).map(|i| watcher::Event::Delete(cm(i))).collect();
        deletions.push(watcher::Event::Apply(cm(n)));
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let fed = tokio::spawn(reflect(rx, writer).collect::<Vec<_>>());
        for e in events {
            tx.unbounded_send(Ok(e)).unwrap();
        }
        while reader.len() < n {
            tokio::task::yield_now().await;
        }
        let kept = reader.get(&ObjectRef::from_obj(&cm(n - 1))).unwrap();
        for e in deletions {
            tx.unbounded_send(Ok(e)).unwrap();
        }
        drop(tx);
        let seen = fed.await.unwrap();
        // Rebuilt: the object kept is a copy in a new table, not the one stored before.
        let now = reader.get(&ObjectRef::from_obj(&cm(n - 1))).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&kept, &now), "not rebuilt");
        // Every event passed on, in order.
        assert_eq!(seen.len(), 2 * n - 10 + 3);
        assert!(matches!(seen.last(), Some(Ok(watcher::Event::Apply(_)))));
        // The store holds exactly what is left, and every object is found.
        assert_eq!(reader.len(), 11);
        for i in (n - 10..n).chain([n]) {
            let o = reader.get(&ObjectRef::from_obj(&cm(i)));
            assert_eq!(o.as_deref(), Some(&cm(i)), "cm-{i}");
        }
        assert!(reader.get(&ObjectRef::from_obj(&cm(0))).is_none());
    }
}

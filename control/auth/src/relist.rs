//! The deletions a re-list implies, passed on as events.
//!
//! Why: when a watch's resume point is too old (410 Gone: an API server restarted, a long
//! network cut), kube's watcher lists again. The list says what exists (`Init`, `InitApply`,
//! `InitDone`), never what was deleted in the gap: the store drops those objects silently at
//! `InitDone`, and a controller that maps events to owners (`owns_stream`) is never told. Here
//! every object the store held before the list and no longer holds after it (or holds under
//! another UID: deleted and made again) is passed on as a `Delete` of the object it held.
//!
//! It never writes the store: it reads the store after the writer (`compact::reflect`, or
//! kube's `reflector`) applied each event, so it goes after that in the stream. During a list
//! it holds the store's objects as they were (shared, not copied).

use std::{hash::Hash, sync::Arc};

use futures::{Stream, StreamExt, stream};
use kube::runtime::{
    reflector::{Lookup, Store},
    watcher,
};

/// `events` (already applied to `store`'s writer) with a `Delete` after each `InitDone` for
/// every object that the list removed from the store.
pub fn with_deletions<K, S>(events: S, store: Store<K>) -> impl Stream<Item = S::Item>
where
    K: Lookup + Clone,
    K::DynamicType: Eq + Hash + Clone + Default,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    // What the store held when the list began (the writer fills a buffer until `InitDone`).
    let mut before: Vec<Arc<K>> = Vec::new();
    events.flat_map(move |event| {
        let mut out = Vec::new();
        match &event {
            Ok(watcher::Event::Init) => before = store.state(),
            Ok(watcher::Event::InitDone) => {
                out = std::mem::take(&mut before)
                    .into_iter()
                    .filter(|old| gone(&store, old))
                    .map(|old| Ok(watcher::Event::Delete(K::clone(&old))))
                    .collect();
            }
            _ => {}
        }
        out.insert(0, event);
        stream::iter(out)
    })
}

/// Whether `store` no longer holds `old`: not at all, or under another UID.
fn gone<K>(store: &Store<K>, old: &K) -> bool
where
    K: Lookup + Clone,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let now = store.get(&old.to_object_ref(K::DynamicType::default()));
    now.is_none_or(|now| now.uid() != old.uid())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
    use kube::runtime::reflector;

    use super::*;

    fn cm(name: &str, uid: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn list(objects: &[ConfigMap]) -> Vec<watcher::Event<ConfigMap>> {
        let mut out = vec![watcher::Event::Init];
        out.extend(objects.iter().cloned().map(watcher::Event::InitApply));
        out.push(watcher::Event::InitDone);
        out
    }

    #[tokio::test]
    async fn a_relist_passes_on_what_it_removed_and_what_was_made_again() {
        let (store, writer) = reflector::store::<ConfigMap>();
        let mut events = list(&[cm("a", "1"), cm("b", "2"), cm("c", "3")]);
        events.push(watcher::Event::Delete(cm("c", "3")));
        // The re-list: a stays, b is gone, d is new; then an ordinary event.
        events.extend(list(&[cm("a", "1"), cm("d", "4")]));
        events.push(watcher::Event::Apply(cm("e", "5")));
        // And a third list in which a was deleted and made again under another UID.
        events.extend(list(&[cm("a", "9"), cm("d", "4"), cm("e", "5")]));
        let n = events.len();
        let applied = liqo_auth_reflect(events, writer);
        let seen: Vec<_> = with_deletions(applied, store.clone())
            .map(Result::unwrap)
            .collect()
            .await;
        // Every event passed on, in order, and one Delete per object gone.
        assert_eq!(seen.len(), n + 2);
        let deletes: Vec<(usize, String, String)> = seen
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                watcher::Event::Delete(o) => Some((
                    i,
                    o.metadata.name.clone().unwrap(),
                    o.metadata.uid.clone().unwrap(),
                )),
                _ => None,
            })
            .collect();
        // c's own Delete (5); b's right after the second list's InitDone (9); a's, with its
        // old UID, right after the third list's InitDone (16).
        assert_eq!(
            deletes,
            [
                (5, "c".into(), "3".into()),
                (10, "b".into(), "2".into()),
                (17, "a".into(), "1".into()),
            ]
        );
        assert!(matches!(seen[9], watcher::Event::InitDone));
        assert!(matches!(seen[16], watcher::Event::InitDone));
        assert_eq!(store.len(), 3);
    }

    #[tokio::test]
    async fn the_first_list_implies_no_deletion() {
        let (store, writer) = reflector::store::<ConfigMap>();
        let events = list(&[cm("a", "1")]);
        let seen: Vec<_> = with_deletions(liqo_auth_reflect(events, writer), store)
            .collect()
            .await;
        assert_eq!(seen.len(), 3);
        assert!(
            !seen
                .iter()
                .any(|e| matches!(e, Ok(watcher::Event::Delete(_))))
        );
    }

    /// The events applied to `writer` in order, as `compact::reflect` does in the binaries.
    fn liqo_auth_reflect(
        events: Vec<watcher::Event<ConfigMap>>,
        writer: reflector::store::Writer<ConfigMap>,
    ) -> impl Stream<Item = watcher::Result<watcher::Event<ConfigMap>>> {
        crate::compact::reflect(stream::iter(events.into_iter().map(Ok)), writer)
    }
}

//! The watches' tests.

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use super::*;

fn cm(name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("remote".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Every key queued now, in order.
async fn drain(q: &Queue<Key>) -> Vec<String> {
    let mut out = Vec::new();
    while q.take_stats().queued > 0 {
        let k = q.next().await;
        q.done(&k);
        out.push(k.name);
    }
    out
}

#[tokio::test]
async fn a_relist_queues_only_what_changed_or_went() {
    use watcher::Event::{Apply, Init, InitApply, InitDone};
    let queue = Arc::new(Queue::default());
    let (reader, writer) = reflector::store::<ConfigMap>();
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let fed = tokio::spawn(feed(rx, writer, queue.clone(), key_of("local")));
    let send = |events: Vec<watcher::Event<ConfigMap>>| {
        for e in events {
            tx.unbounded_send(Ok(e)).unwrap();
        }
    };
    let settle = || async {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    };
    send(vec![
        Init,
        InitApply(cm("a", "1")),
        InitApply(cm("b", "1")),
        InitDone,
        Apply(cm("c", "2")),
    ]);
    settle().await;
    assert_eq!(
        drain(&queue).await,
        ["a", "b", "c"],
        "the first list queues all"
    );
    // Re-listed: a unchanged, b changed, c gone, d new.
    send(vec![
        Init,
        InitApply(cm("a", "1")),
        InitApply(cm("b", "3")),
        InitApply(cm("d", "4")),
    ]);
    settle().await;
    // Nothing before the list is done: the store still holds the old objects.
    assert_eq!(queue.take_stats().queued, 0);
    send(vec![InitDone]);
    settle().await;
    assert_eq!(drain(&queue).await, ["b", "d", "c"]);
    assert_eq!(reader.len(), 3);
    assert!(reader.get(&ObjectRef::from_obj(&cm("c", "2"))).is_none());
    drop(tx);
    fed.await.unwrap();
}

//! The deletions of the offloaded pods' token Secrets on the provider (API server support on):
//! a token Secret deleted, or gone while the watch was down, makes its pod's token forgotten
//! and the pod queued, so the token is written again at once rather than at its renewal.
//!
//! Metadata only: the watch keeps names and owners, never a token. [`Seen`] is the pure core
//! (which pods' Secrets are gone after each event); [`follow`] the thin I/O around it, which
//! tells when it has first listed (the namespace's reflection waits for it: a Secret deleted
//! before would be missed).

use std::{collections::BTreeSet, sync::Arc};

use control::api::virtualkubelet::ShadowPod;
use futures::StreamExt;
use k8s_openapi::{api::core::v1::Secret, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Resource,
    api::PartialObjectMeta,
    runtime::{WatchStreamExt, watcher},
};
use tokio::sync::oneshot;

use super::{issued::Tokens, key::Key, queue::Queue};

/// The pod a token Secret belongs to: the owner ShadowPod's name (the home pod's), in the
/// local namespace `namespace`.
pub fn owner_key(namespace: &str, meta: &ObjectMeta) -> Option<Key> {
    let owner =
        meta.owner_references.iter().flatten().find(|o| {
            o.kind == ShadowPod::kind(&()) && o.api_version == ShadowPod::api_version(&())
        })?;
    Some(Key {
        namespace: namespace.to_owned(),
        name: owner.name.clone(),
    })
}

/// The token Secrets present, by pod, as the watch's events tell them. (Not `watch::feed`,
/// which after a re-list queues every key it held: that would mint every pod's token again.)
#[derive(Debug, Default)]
pub struct Seen {
    present: BTreeSet<Key>,
    /// During a re-list: what it has listed so far.
    relist: Option<BTreeSet<Key>>,
}

impl Seen {
    /// Takes one event (objects as their pod keys); returns the pods whose Secret is gone.
    pub fn event(&mut self, event: watcher::Event<Option<Key>>) -> Vec<Key> {
        match event {
            watcher::Event::Init => {
                self.relist = Some(BTreeSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(k) => {
                if let (Some(k), Some(r)) = (k, self.relist.as_mut()) {
                    r.insert(k);
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                let Some(listed) = self.relist.take() else {
                    return Vec::new();
                };
                let gone = self.present.difference(&listed).cloned().collect();
                self.present = listed;
                gone
            }
            watcher::Event::Apply(k) => {
                self.present.extend(k);
                Vec::new()
            }
            watcher::Event::Delete(k) => k
                .inspect(|k| {
                    self.present.remove(k);
                })
                .into_iter()
                .collect(),
        }
    }
}

/// Follows the token Secrets of local namespace `namespace` (`api` and `config`: their
/// metadata in the remote namespace, our labels and the pod label) until aborted; `listed`
/// is told once they are first listed.
pub async fn follow(
    api: Api<PartialObjectMeta<Secret>>,
    config: watcher::Config,
    namespace: String,
    tokens: Arc<Tokens>,
    queue: Arc<Queue<Key>>,
    listed: oneshot::Sender<()>,
) {
    let mut seen = Seen::default();
    let mut listed = Some(listed);
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    while let Some(event) = events.next().await {
        let key = |o: &PartialObjectMeta<Secret>| owner_key(&namespace, &o.metadata);
        let event = match event {
            Ok(watcher::Event::Init) => watcher::Event::Init,
            Ok(watcher::Event::InitApply(o)) => watcher::Event::InitApply(key(&o)),
            Ok(watcher::Event::InitDone) => {
                if let Some(tx) = listed.take()
                    && tx.send(()).is_err()
                {
                    // The namespace's readiness task is gone: it is being stopped.
                    tracing::debug!(namespace = %namespace, "token Secrets listed, nobody waits");
                }
                watcher::Event::InitDone
            }
            Ok(watcher::Event::Apply(o)) => watcher::Event::Apply(key(&o)),
            Ok(watcher::Event::Delete(o)) => watcher::Event::Delete(key(&o)),
            // The watcher retries with its backoff.
            Err(e) => {
                tracing::warn!(error = %e, "token Secret watch failed, retrying");
                continue;
            }
        };
        for key in seen.event(event) {
            tracing::info!(pod = %key, "token Secret deleted on the provider: written again");
            tokens.forget(&key);
            queue.add(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            namespace: "demo".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_deleted_secret_names_its_pod_once() {
        let mut s = Seen::default();
        assert!(s.event(watcher::Event::Init).is_empty());
        assert!(
            s.event(watcher::Event::InitApply(Some(key("a"))))
                .is_empty()
        );
        assert!(s.event(watcher::Event::InitDone).is_empty());
        assert!(s.event(watcher::Event::Apply(Some(key("b")))).is_empty());
        assert_eq!(s.event(watcher::Event::Delete(Some(key("b")))), [key("b")]);
        // Not ours (no owner): nothing.
        assert!(s.event(watcher::Event::Delete(None)).is_empty());
    }

    #[test]
    fn secrets_gone_while_the_watch_was_down_are_named_after_the_relist() {
        let mut s = Seen::default();
        for e in [
            watcher::Event::Init,
            watcher::Event::InitApply(Some(key("a"))),
            watcher::Event::InitApply(Some(key("b"))),
            watcher::Event::InitDone,
        ] {
            assert!(s.event(e).is_empty());
        }
        s.event(watcher::Event::Init);
        s.event(watcher::Event::InitApply(Some(key("b"))));
        assert_eq!(s.event(watcher::Event::InitDone), [key("a")]);
        // Only once.
        s.event(watcher::Event::Init);
        assert_eq!(s.event(watcher::Event::InitDone), [key("b")]);
    }

    #[test]
    fn a_token_secret_names_its_pod() {
        use control::shadowpod::token::token_secret;
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "demo", "uid": "u-1"}
        }))
        .expect("a pod");
        let secret = token_secret(&pod, "demo-rome", "t", "shadow-uid", Default::default());
        assert_eq!(owner_key("demo", &secret.metadata), Some(key("web-1")));
    }
}

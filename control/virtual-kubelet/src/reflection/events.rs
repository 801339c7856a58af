//! Events back home: per mapped namespace, a watch of the provider's Events about Pods there;
//! each new one about a remote pod of ours (in the remote store) whose home pod is on the
//! node becomes an Event on the home pod (`control::shadowpod::events`: which, and at most a
//! burst then one each few seconds per pod). Events listed at start are history: only those
//! that come after are mirrored.

use std::{sync::Arc, time::Instant};

use control::lean::StoredPod;
use control::shadowpod::events::{Limiter, mirror};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::{
    Api, Resource,
    runtime::{
        WatchStreamExt,
        events::{Event, EventType, Recorder, Reporter},
        reflector::{ObjectRef, Store},
        watcher,
    },
};

use crate::VkConfig;

/// What the follower of one namespace reads.
pub struct Follow {
    /// The configuration.
    pub cfg: Arc<VkConfig>,
    /// The home pods on the node.
    pub local: Store<StoredPod>,
    /// Our remote pods in the namespace.
    pub remote_pods: Store<StoredPod>,
}

/// Mirrors the Events of the remote namespace `remote` onto the home pods of `local`, until
/// aborted.
pub async fn follow(f: Follow, local: String, remote: String) {
    let api: Api<CoreEvent> = Api::namespaced(f.cfg.remote.watch.clone(), &remote);
    let config = liqo_auth::compact::listing().fields(&control::shadowpod::events::watch_fields());
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let provider = f.cfg.foreign.cluster_name.to_string();
    let mut limiter = Limiter::default();
    // The limiter is pruned on a timer, not at the next Event: after a burst (ten thousand
    // pods started, then deleted) no Event may come for a long time, and the buckets of pods
    // long gone, made in the middle of the burst's memory, would stay.
    let mut prune = tokio::time::interval(control::shadowpod::events::REFILL);
    prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            event = events.next() => match event {
                Some(event) => event,
                None => break,
            },
            _ = prune.tick() => {
                limiter.prune(Instant::now());
                continue;
            }
        };
        let e = match event {
            Ok(watcher::Event::Apply(e)) => e,
            // The initial listing (and a re-listing) is history.
            Ok(_) => continue,
            Err(err) => {
                tracing::warn!(error = %err, namespace = %remote, "remote Event watch failed, retrying");
                continue;
            }
        };
        let Some(name) = e.involved_object.name.clone() else {
            continue;
        };
        let Some(remote_pod) = f.remote_pods.get(&ObjectRef::new(&name).within(&remote)) else {
            // Not one of ours.
            continue;
        };
        if e.involved_object.uid.is_some() && e.involved_object.uid != remote_pod.metadata.uid {
            // About an earlier pod of that name.
            continue;
        }
        let Some(pod) = f.local.get(&ObjectRef::new(&name).within(&local)) else {
            continue;
        };
        let Some(m) = mirror(&e, &name, &provider) else {
            continue;
        };
        if !limiter.allow(&name, Instant::now()) {
            tracing::debug!(pod = %name, reason = %m.reason, "remote Event dropped (rate limit)");
            continue;
        }
        let event = Event {
            type_: if m.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: m.reason,
            note: Some(m.note),
            action: m.action,
            secondary: None,
        };
        // A mirrored Event is a courtesy: a failure is logged, not retried. Each is published
        // by a recorder of its own: kube's Recorder keeps every Event it published for six
        // minutes (to count repeats in a series), ten thousand of them in a burst. A remote
        // Event seen again (its count grew) is mirrored again as a new Event, within the
        // limiter's pace per pod.
        let recorder = Recorder::new(f.cfg.local.clone(), reporter(&f.cfg));
        if let Err(err) = recorder.publish(&event, &pod.object_ref(&())).await {
            tracing::warn!(pod = %name, error = %err, "publishing a mirrored Event");
        }
    }
}

/// Who publishes the Events of pod reflection on home pods: the reflection's field manager, on
/// this virtual node.
pub fn reporter(cfg: &VkConfig) -> Reporter {
    Reporter {
        controller: control::consts::reflection::FIELD_MANAGER.into(),
        instance: Some(cfg.node_name()),
    }
}

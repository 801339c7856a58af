//! A reflection worker: takes a key, reads the stores, maps the IPs, [`decide`]s, performs the
//! actions (remote writes with field manager `reflection.liqo.io`, deletions with UID
//! preconditions); a failure queues the key again after a growing delay.

use std::{sync::Arc, time::Duration};

use control::{
    api::virtualkubelet::ShadowPod,
    consts::{labels, reflection::FIELD_MANAGER, values},
    forge::pod::is_reflected,
};
use k8s_openapi::{
    api::core::v1::{Pod, PodStatus},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::{
        events::{Event, EventType},
        reflector::ObjectRef,
    },
};
use serde_json::{Map, Value, json};
use tokio::sync::watch::Receiver;

use super::{
    Key, Shared,
    decide::{self, Action, Context, Target},
    ips::{self, IpError},
};

/// The first retry delay of a failing key.
pub const RETRY: Duration = Duration::from_millis(500);
/// The longest retry delay.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// Why handling a key failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// An API request failed.
    #[error("{what}")]
    Kube {
        /// What was asked.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// An IP could not be mapped.
    #[error("pod IP")]
    Ip(#[source] IpError),
    /// The remote name is taken by an object that is not ours.
    #[error("remote ShadowPod {namespace}/{name} exists and is not ours")]
    NotOurs {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

fn kerr(what: impl Into<String>) -> impl FnOnce(kube::Error) -> HandleError {
    let what = what.into();
    move |source| HandleError::Kube { what, source }
}

/// The delay after `n` consecutive failures: [`RETRY`] doubling up to [`MAX_RETRY`].
pub fn retry_delay(n: u32) -> Duration {
    RETRY
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(MAX_RETRY)
}

/// A worker: waits for the local store and the first mapping, then handles keys forever.
pub async fn run(shared: Arc<Shared>, mut mapped: Receiver<bool>) -> &'static str {
    if shared.local.wait_until_ready().await.is_err() || mapped.wait_for(|m| *m).await.is_err() {
        return "worker (its watches ended)";
    }
    loop {
        let key = shared.queue.next().await;
        let result = handle(&shared, &key).await;
        let mut failures = shared.failures.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(()) => {
                failures.remove(&key);
            }
            Err(e) => {
                let n = failures.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                let delay = retry_delay(*n);
                drop(failures);
                tracing::warn!(pod = %key, error = %DisplayChain(&e), retry_in = ?delay, "pod reflection failed");
                shared.queue.add_after(key.clone(), delay);
            }
        }
        shared.queue.done(&key);
    }
}

/// An error with its causes, `: `-separated.
struct DisplayChain<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// One key: read, decide, act.
pub async fn handle(shared: &Shared, key: &Key) -> Result<(), HandleError> {
    let cfg = &shared.cfg;
    let local = shared
        .local
        .get(&ObjectRef::new(&key.name).within(&key.namespace));
    let view = shared.namespace(&key.namespace);
    let (shadow, remote) = match &view {
        // Mapped, remote stores not listed yet: the key is queued again once they are.
        Some(v) if !v.ready => return Ok(()),
        Some(v) => (
            v.shadows.get(&ObjectRef::new(&key.name).within(&v.remote)),
            v.pods.get(&ObjectRef::new(&key.name).within(&v.remote)),
        ),
        None => (None, None),
    };
    let (mut pod_ips, mut restarts) = (Vec::new(), 0);
    if let (Some(l), Some(r)) = (&local, &remote) {
        let local_status = l.status.clone().unwrap_or_default();
        restarts = {
            let mut known = shared.restarts.lock().unwrap_or_else(|p| p.into_inner());
            let tracked = decide::track_restarts(known.get(key), &local_status, r);
            let count = tracked.count;
            known.insert(key.clone(), tracked);
            count
        };
        let remote_ips = r.status.as_ref().map(ips::remote_ips).unwrap_or_default();
        pod_ips = shared
            .ips
            .map(key, &remote_ips)
            .await
            .map_err(HandleError::Ip)?;
    }
    let target = match &view {
        Some(v) => Target::Mapped {
            namespace: &v.remote,
            shadow: shadow.as_deref(),
            remote: remote.as_deref(),
        },
        None => Target::Unmapped,
    };
    let node_ip = cfg.node_ip.to_string();
    let ctx = Context {
        home: &cfg.home.cluster_id,
        foreign: &cfg.foreign.cluster_id,
        node_ip: &node_ip,
        pod_ips: &pod_ips,
        restarts,
        now: Time(Timestamp::now()),
    };
    let actions = decide::decide(local.as_deref(), target, &ctx);
    for action in actions {
        perform(
            shared,
            key,
            local.as_deref(),
            view.as_ref().map(|v| v.remote.as_str()),
            action,
        )
        .await?;
    }
    Ok(())
}

/// A Warning Event on the local pod (logged too).
async fn warn(shared: &Shared, key: &Key, local: Option<&Pod>, reason: &str, note: String) {
    tracing::warn!(pod = %key, %note, "reflection skipped");
    let Some(local) = local else { return };
    let event = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note),
        action: "Reflect".into(),
        secondary: None,
    };
    // An Event is a courtesy: failing to publish it is logged, not retried.
    if let Err(e) = shared
        .recorder
        .publish(&event, &local.object_ref(&()))
        .await
    {
        tracing::warn!(pod = %key, error = %e, "publishing an event");
    }
}

fn precondition(uid: String) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// A deletion whose object is already gone (404) or replaced (409: UID precondition) is done.
fn deleted<T>(r: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

async fn perform(
    shared: &Shared,
    key: &Key,
    local: Option<&Pod>,
    remote_ns: Option<&str>,
    action: Action,
) -> Result<(), HandleError> {
    let cfg = &shared.cfg;
    let local_api: Api<Pod> = Api::namespaced(cfg.local.clone(), &key.namespace);
    let shadows = |ns: &str| -> Api<ShadowPod> { Api::namespaced(cfg.remote.api.clone(), ns) };
    match action {
        Action::Warn { reason, note } => warn(shared, key, local, reason, note).await,
        Action::DeleteShadow { uid } => {
            let Some(ns) = remote_ns else { return Ok(()) };
            let r = shadows(ns)
                .delete(&key.name, &precondition(uid.clone()))
                .await;
            if deleted(r).map_err(kerr(format!("deleting ShadowPod {ns}/{}", key.name)))? {
                tracing::info!(pod = %key, remote = %ns, %uid, "ShadowPod deleted");
            }
        }
        Action::DeleteLocal { uid } => {
            let mut dp = precondition(uid);
            dp.grace_period_seconds = Some(0);
            let r = local_api.delete(&key.name, &dp).await;
            if deleted(r).map_err(kerr(format!("deleting pod {key}")))? {
                tracing::info!(pod = %key, "local pod deleted");
            }
        }
        Action::LabelLocal => {
            let patch = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": key.name, "namespace": key.namespace,
                             "labels": {labels::SHADOW_POD: values::TRUE}}
            });
            local_api
                .patch(
                    &key.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
                .map_err(kerr(format!("labelling pod {key}")))?;
        }
        Action::CreateShadow(shadow) => {
            let Some(ns) = remote_ns else { return Ok(()) };
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            match shadows(ns).create(&pp, &shadow).await {
                Ok(_) => tracing::info!(pod = %key, remote = %ns, "ShadowPod created"),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    // Ours but not yet in the store: its event comes. Not ours: never
                    // touched, retried (it may go away).
                    let existing = shadows(ns)
                        .get_opt(&key.name)
                        .await
                        .map_err(kerr(format!("reading ShadowPod {ns}/{}", key.name)))?;
                    let cfg = &shared.cfg;
                    if let Some(e) = existing
                        && !is_reflected(
                            e.metadata.labels.as_ref(),
                            &cfg.home.cluster_id,
                            &cfg.foreign.cluster_id,
                        )
                    {
                        let note = decide::not_ours_note("ShadowPod", ns, &key.name);
                        warn(shared, key, local, decide::REASON_NOT_OURS, note).await;
                        return Err(HandleError::NotOurs {
                            namespace: ns.to_owned(),
                            name: key.name.clone(),
                        });
                    }
                }
                Err(e) => {
                    return Err(kerr(format!("creating ShadowPod {ns}/{}", key.name))(e));
                }
            }
        }
        Action::UpdateShadow(shadow) => {
            let Some(ns) = remote_ns else { return Ok(()) };
            shadows(ns)
                .patch(
                    &key.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&*shadow),
                )
                .await
                .map_err(kerr(format!("applying ShadowPod {ns}/{}", key.name)))?;
            tracing::info!(pod = %key, remote = %ns, "ShadowPod updated");
        }
        Action::WriteStatus(status) => {
            let current = local.and_then(|l| l.status.clone()).unwrap_or_default();
            let patch = status_patch(&current, &status);
            local_api
                .patch_status(
                    &key.name,
                    &PatchParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PatchParams::default()
                    },
                    &Patch::Merge(json!({ "status": patch })),
                )
                .await
                .map_err(kerr(format!("writing the status of pod {key}")))?;
            tracing::debug!(pod = %key, phase = ?status.phase, "pod status written");
        }
        Action::Forget => {
            shared
                .restarts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(key);
            shared.ips.forget(key);
            shared
                .failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(key);
        }
    }
    Ok(())
}

/// The JSON merge patch turning status `current` into `target`: every field of `target`, and
/// `null` for the top-level fields only `current` has (lists and objects are replaced whole).
pub fn status_patch(current: &PodStatus, target: &PodStatus) -> Value {
    let as_map = |s: &PodStatus| match serde_json::to_value(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut patch = as_map(target);
    for k in as_map(current).keys() {
        if !patch.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    Value::Object(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_up_to_a_minute() {
        let s: Vec<u128> = (1..=9).map(|n| retry_delay(n).as_millis()).collect();
        assert_eq!(s, [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY);
    }

    #[test]
    fn the_status_patch_sets_the_target_and_clears_what_only_the_current_has() {
        let current: PodStatus = serde_json::from_value(json!({
            "phase": "Pending", "reason": "OffloadingBackOff", "message": "x",
            "conditions": [{"type": "PodScheduled", "status": "True"}]
        }))
        .unwrap();
        let target: PodStatus = serde_json::from_value(json!({
            "phase": "Running", "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]
        }))
        .unwrap();
        assert_eq!(
            status_patch(&current, &target),
            json!({"phase": "Running", "podIP": "10.0.0.1", "reason": null, "message": null,
                   "conditions": [{"type": "Ready", "status": "True"}]})
        );
    }
}

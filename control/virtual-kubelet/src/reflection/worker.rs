//! A reflection worker: takes a key, reads the stores, decides
//! (`control::shadowpod::reflection`), maps the IPs if a status is to be written (a failing
//! IPAM holds back only that), performs the actions (remote writes with field manager
//! `reflection.liqo.io`, deletions with UID preconditions); a failure queues the key again
//! after a growing delay.

use std::{sync::Arc, time::Duration};

use control::{
    api::virtualkubelet::ShadowPod,
    consts::{labels, reflection::FIELD_MANAGER, values},
    shadowpod::consumer::is_reflected,
};
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::reflector::ObjectRef,
};
use serde_json::json;
use tokio::sync::watch::Receiver;

use control::shadowpod::reflection::{self as decide, Action, Context, Target};

use super::{
    deletions,
    ips::{self, IpError},
    key::Key,
    probe,
    shared::Shared,
    status_write,
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
    /// The pod's ServiceAccount token could not be written.
    #[error("ServiceAccount token")]
    Token(#[source] super::tokens::TokenError),
    /// Where the provider's pods reach the home API server is not known (API server support:
    /// the pod's ShadowPod waits for it).
    #[error("the home API server's address")]
    HomeApi(#[source] crate::home_api::HomeApiError),
    /// A ShadowPod create found the name taken (409), then nothing there: no event will
    /// come, so the key is retried.
    #[error("remote ShadowPod {namespace}/{name} existed at create and was gone at read")]
    Vanished {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A stored pod's spec or status does not decode (never: the store wrote it).
    #[error("pod {0} as stored")]
    Stored(String, #[source] control::lean::CompactDecodeError),
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

/// A worker: waits for the local store (`listed`: `liqo_auth::ready`, which wakes every
/// worker) and the first mapping, then handles keys forever.
pub async fn run(
    shared: Arc<Shared>,
    listed: liqo_auth::ready::Listed,
    mut mapped: Receiver<bool>,
) -> &'static str {
    if !listed.await || mapped.wait_for(|m| *m).await.is_err() {
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
                tracing::warn!(pod = %key, error = %liqo_types::chain(&e), retry_in = ?delay, "pod reflection failed");
                shared.queue.add_after(key.clone(), delay);
            }
        }
        shared.queue.done(&key);
    }
}

/// One key: read, decide, act.
pub async fn handle(shared: &Shared, key: &Key) -> Result<(), HandleError> {
    let cfg = &shared.cfg;
    // Decoded from the stores' compact form for this decision only.
    let local = shared
        .stored_local(key)
        .map_err(|e| HandleError::Stored(key.to_string(), e))?;
    let view = shared.namespace(&key.namespace);
    let (shadow, remote) = match &view {
        // Mapped, remote stores not listed yet: the key is queued again once they are.
        Some(v) if !v.ready => return Ok(()),
        Some(v) => {
            // One we created and the watch did not bring yet counts as there.
            let standing = shared.created.or_stored(
                key,
                &v.remote,
                v.shadows.get(&ObjectRef::new(&key.name).within(&v.remote)),
                std::time::Instant::now(),
            );
            if let Some(after) = standing.recheck {
                shared.queue.add_after(key.clone(), after);
            }
            let remote = v
                .pods
                .get(&ObjectRef::new(&key.name).within(&v.remote))
                .map(|p| p.to_pod())
                .transpose()
                .map_err(|e| HandleError::Stored(format!("{}/{}", v.remote, key.name), e))?;
            (standing.shadow, remote)
        }
        None => (None, None),
    };
    let shadow = shadow.as_deref().map(|s| &s.metadata);
    // Only the pod of the current ShadowPod counts (restarts, IPs, status).
    let current = decide::current_remote(shadow, remote.as_ref());
    let (mut remote_ips, mut restarts) = (Vec::new(), 0);
    if let (Some(l), Some(r)) = (&local, current) {
        let local_status = l.status.clone().unwrap_or_default();
        restarts = {
            let mut known = shared.restarts.lock().unwrap_or_else(|p| p.into_inner());
            let tracked = decide::track_restarts(known.get(key), &local_status, r);
            let count = tracked.count;
            known.insert(key.clone(), tracked);
            count
        };
        remote_ips = r.status.as_ref().map(ips::remote_ips).unwrap_or_default();
    }
    let target = match &view {
        Some(v) => Target::Mapped {
            namespace: &v.remote,
            shadow,
            remote: remote.as_ref(),
        },
        None => Target::Unmapped,
    };
    let api = crate::home_api::for_pod(shared, local.as_ref())
        .await
        .map_err(HandleError::HomeApi)?;
    let node_ip = cfg.node_ip.to_string();
    let now = Time(Timestamp::now());
    let ctx = Context {
        home: &cfg.home.cluster_id,
        foreign: &cfg.foreign.cluster_id,
        node_ip: &node_ip,
        api: api.as_ref(),
        pod_ips: &[],
        restarts,
        now: now.clone(),
    };
    let label_wait = local
        .as_ref()
        .and_then(|l| decide::label_in(l, shadow, &ctx));
    // Decided without IPs first: the IPAM is asked only for a status to write, and its
    // failure holds back that write alone (deletions and ShadowPod writes still happen).
    let mut actions = decide::decide(local.as_ref(), target, &ctx);
    let mut ip_error = None;
    if decide::needs_ips(&actions, &remote_ips) {
        match shared.ips.map(key, &remote_ips).await {
            Ok(pod_ips) => {
                let ctx = Context {
                    pod_ips: &pod_ips,
                    ..ctx
                };
                actions = decide::decide(local.as_ref(), target, &ctx);
            }
            Err(e) => {
                actions = decide::without_status(actions);
                ip_error = Some(e);
            }
        }
    }
    // A label not written now and due later alone: the pod is seen again then. (A status
    // write whose label is refused is written without it: the pod's update event brings it
    // back, and that pass queues it for the label's time.)
    let labelling = actions.iter().any(|a| {
        matches!(
            a,
            Action::LabelLocal | Action::WriteStatus { label: true, .. }
        )
    });
    if let Some(after) = label_wait.filter(|d| !labelling && !d.is_zero()) {
        shared.queue.add_after(key.clone(), after);
    }
    for action in actions {
        perform(
            shared,
            key,
            local.as_ref(),
            view.as_ref().map(|v| v.remote.as_str()),
            action,
        )
        .await?;
    }
    if let (Some(l), Some(v)) = (&local, &view)
        && l.metadata.deletion_timestamp.is_none()
        && let Some(delay) = decide::probe_foreign(shadow, current, &now)
    {
        probe::probe(shared, key, l, &v.remote, shadow, delay).await;
    }
    if api.is_some()
        && let (Some(l), Some(v), Some(s)) = (&local, &view, shadow)
        && l.metadata.deletion_timestamp.is_none()
        // Only beside a ShadowPod of ours that stays: a token never goes to another's.
        && s.deletion_timestamp.is_none()
        && is_reflected(
            s.labels.as_ref(),
            &cfg.home.cluster_id,
            &cfg.foreign.cluster_id,
        )
        && let Some(need) = control::shadowpod::token::need(l)
    {
        super::tokens::ensure(shared, key, l, &v.remote, s, &need)
            .await
            .map_err(HandleError::Token)?;
    }
    match ip_error {
        Some(e) => Err(HandleError::Ip(e)),
        None => Ok(()),
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
        Action::Warn { reason, note } => probe::warn(shared, key, local, reason, note).await,
        Action::DeleteShadow { uid } => {
            let Some(ns) = remote_ns else { return Ok(()) };
            deletions::shadow(shared, key, ns, uid)
                .await
                .map_err(kerr(format!("deleting ShadowPod {ns}/{}", key.name)))?;
        }
        Action::DeleteLocal { uid } => deletions::local(shared, key, uid)
            .await
            .map_err(kerr(format!("deleting pod {key}")))?,
        Action::LabelLocal => {
            let patch = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": key.name, "namespace": key.namespace,
                             "labels": {labels::SHADOW_POD: values::TRUE}}
            });
            let written = local_api
                .patch(
                    &key.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
                .map_err(kerr(format!("labelling pod {key}")))?;
            shared.record_pending(key, local, &written, |p| p.labelled = true);
        }
        Action::CreateShadow(shadow) => {
            let Some(ns) = remote_ns else { return Ok(()) };
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            match shadows(ns).create(&pp, &shadow).await {
                Ok(mut made) => {
                    control::lean::meta(&mut made.metadata);
                    shared
                        .created
                        .insert(key, ns, made, std::time::Instant::now());
                    tracing::info!(pod = %key, remote = %ns, "ShadowPod created");
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    // Ours but not yet in the store: its event comes. Not ours: never
                    // touched, retried (it may go away).
                    let existing = shadows(ns)
                        .get_opt(&key.name)
                        .await
                        .map_err(kerr(format!("reading ShadowPod {ns}/{}", key.name)))?;
                    let cfg = &shared.cfg;
                    let Some(e) = existing else {
                        return Err(HandleError::Vanished {
                            namespace: ns.to_owned(),
                            name: key.name.clone(),
                        });
                    };
                    if !is_reflected(
                        e.metadata.labels.as_ref(),
                        &cfg.home.cluster_id,
                        &cfg.foreign.cluster_id,
                    ) {
                        let note = decide::not_ours_note("ShadowPod", ns, &key.name);
                        probe::warn(shared, key, local, decide::REASON_NOT_OURS, note).await;
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
        Action::WriteStatus { status, label } => {
            let current = local.and_then(|l| l.status.clone()).unwrap_or_default();
            let written = status_write::write(&local_api, key, &current, &status, label)
                .await
                .map_err(kerr(format!("writing the status of pod {key}")))?;
            let kept = written.pod.status.clone().map(Box::new);
            shared.record_pending(key, local, &written.pod, |p| {
                p.status = kept;
                p.labelled |= written.labelled;
            });
            tracing::debug!(pod = %key, phase = ?status.phase, "pod status written");
        }
        Action::Forget => shared.forget(key),
    }
    Ok(())
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
}

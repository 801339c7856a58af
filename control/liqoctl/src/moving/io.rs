//! The move's objects: made, followed (the two Jobs), read (their logs) and deleted.

use std::time::{Duration, Instant};

use control::storage::moving::Names;
use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        batch::v1::Job,
        core::v1::{Event, PersistentVolumeClaim, Pod, Secret, Service},
    },
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, LogParams, PostParams, PropagationPolicy},
};
use serde::{Serialize, de::DeserializeOwned};

use super::{MoveError, kube_err};

/// Creates `obj` in `ns`.
pub(super) async fn create<K>(client: &Client, ns: &str, obj: K) -> Result<(), MoveError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let what = format!("creating {} {ns}/{}", K::kind(&()), obj.name_any());
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .map(drop)
        .map_err(kube_err(what))
}

/// Deletes every object of the move `names` in `ns` (the Jobs with their pods, waited for:
/// until they are gone they mount the claims). With `earlier`, says so when there was
/// something: the leftovers of a move that was killed.
pub(super) async fn clean(
    client: &Client,
    ns: &str,
    names: &Names,
    earlier: bool,
) -> Result<(), MoveError> {
    let lp = ListParams::default().labels(&names.selector());
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let mut found = delete_jobs(client, ns, names, PODS_GONE).await?;
    found += delete_all::<Service>(client, ns, &lp, &dp).await?;
    found += delete_all::<Secret>(client, ns, &lp, &dp).await?;
    found += delete_all::<PersistentVolumeClaim>(client, ns, &lp, &dp).await?;
    // The move's claim is made again under the same name: wait until it is gone (its
    // finalizer goes once its pods are).
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + PODS_GONE;
    while !claims
        .list(&lp)
        .await
        .map_err(kube_err(format!("listing the move's claims in {ns}")))?
        .items
        .is_empty()
    {
        if Instant::now() >= deadline {
            return Err(MoveError::Wait(format!(
                "the move's claim {ns}/{} was not gone within {PODS_GONE:?}",
                names.base
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if earlier && found > 0 {
        println!(
            "Deleted {found} object(s) an earlier, interrupted move of this claim left ({})",
            names.selector()
        );
    }
    Ok(())
}

async fn delete_all<K>(
    client: &Client,
    ns: &str,
    lp: &ListParams,
    dp: &DeleteParams,
) -> Result<usize, MoveError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    let kind = K::kind(&());
    let items = api
        .list(lp)
        .await
        .map_err(kube_err(format!("listing the move's {kind}s in {ns}")))?
        .items;
    for o in &items {
        match api.delete(&o.name_any(), dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(kube_err(format!("deleting {kind} {ns}/{}", o.name_any()))(
                    e,
                ));
            }
        }
    }
    Ok(items.len())
}

/// Waits until both Jobs of `names` succeeded; their pods' logs (sender's, receiver's). A Job
/// that failed, or `timeout`: the failure, with what its pod said last.
pub(super) async fn wait_jobs(
    client: &Client,
    ns: &str,
    names: &Names,
    timeout: Duration,
) -> Result<(String, String), MoveError> {
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    let (send, receive) = (names.job("send"), names.job("receive"));
    loop {
        let mut done = 0;
        for name in [&send, &receive] {
            let job = jobs
                .get(name)
                .await
                .map_err(kube_err(format!("reading Job {ns}/{name}")))?;
            let s = job.status.unwrap_or_default();
            if s.failed.unwrap_or(0) > 0 {
                let said = pod_log(client, ns, name)
                    .await
                    .unwrap_or_else(|e| e.to_string());
                return Err(MoveError::Copy(format!(
                    "Job {ns}/{name} failed; its pod said: {}",
                    last_lines(&said)
                )));
            }
            if s.succeeded.unwrap_or(0) > 0 {
                done += 1;
            }
        }
        if done == 2 {
            return Ok((
                pod_log(client, ns, &send).await?,
                pod_log(client, ns, &receive).await?,
            ));
        }
        if Instant::now() >= deadline {
            let said = pod_log(client, ns, &send)
                .await
                .unwrap_or_else(|e| e.to_string());
            let (sender, receiver) = futures::future::join(
                why_not_done(client, ns, &send),
                why_not_done(client, ns, &receive),
            )
            .await;
            let stuck = format!("{sender}; {receiver}");
            let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
                .get_opt(&names.base)
                .await
                .map_err(kube_err(format!("reading claim {ns}/{}", names.base)))?;
            let phase = claim
                .and_then(|c| c.status?.phase)
                .unwrap_or_else(|| "gone".into());
            return Err(MoveError::Copy(format!(
                "the copy did not end within {timeout:?} (the new claim {ns}/{} is {phase}: see \
                 its Events and the receiver pod's); the sender said: {}; {stuck}",
                names.base,
                last_lines(&said)
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Why Job `job` has not succeeded yet, for an error: its pod's phase and what its containers
/// wait for, or, without a pod, the last warning about the Job (a pod the Job controller
/// could not create: an admission webhook's refusal, a quota); a read that fails is said.
async fn why_not_done(client: &Client, ns: &str, job: &str) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await;
    match pods {
        Ok(l) if !l.items.is_empty() => {
            let each: Vec<String> = l.items.iter().map(pod_state).collect();
            format!("Job {job}: {}", each.join(", "))
        }
        Ok(_) => {
            let events = Api::<Event>::namespaced(client.clone(), ns)
                .list(&ListParams::default().fields(&format!(
                    "involvedObject.kind=Job,involvedObject.name={job},type=Warning"
                )))
                .await;
            match events {
                Ok(l) => match l.items.iter().max_by_key(|e| event_time(e)) {
                    Some(e) => format!(
                        "Job {job}: no pod; its last warning: {}: {}",
                        e.reason.as_deref().unwrap_or("?"),
                        e.message.as_deref().unwrap_or("").trim()
                    ),
                    None => format!("Job {job}: no pod, and no warning about the Job"),
                },
                Err(e) => format!("Job {job}: no pod; its events unread: {e}"),
            }
        }
        Err(e) => format!("Job {job}: its pods unread: {e}"),
    }
}

/// `name phase (container: waiting reason)` of a Job's pod.
fn pod_state(p: &Pod) -> String {
    let status = p.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("no phase");
    let waiting: Vec<String> = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let w = c.state.as_ref()?.waiting.as_ref()?;
            Some(format!(
                "{}: {}",
                c.name,
                w.reason.as_deref().unwrap_or("waiting")
            ))
        })
        .collect();
    let node = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("not scheduled");
    if waiting.is_empty() {
        format!("pod {} {phase} on {node}", p.name_any())
    } else {
        format!(
            "pod {} {phase} on {node} ({})",
            p.name_any(),
            waiting.join(", ")
        )
    }
}

/// When an event last happened (for the latest of several).
fn event_time(e: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .or(e.first_timestamp.as_ref())
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
}

/// The log of the pod of Job `job`.
async fn pod_log(client: &Client, ns: &str, job: &str) -> Result<String, MoveError> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let found = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .map_err(kube_err(format!("listing the pods of Job {ns}/{job}")))?
        .items;
    let Some(pod) = found.first() else {
        return Ok(format!("(no pod of Job {job})"));
    };
    pods.logs(&pod.name_any(), &LogParams::default())
        .await
        .map_err(kube_err(format!(
            "reading the log of pod {ns}/{}",
            pod.name_any()
        )))
}

/// The last lines of `log` (on one line), for an error.
pub(super) fn last_lines(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "(nothing)".into()
    } else {
        tail.join(" | ")
    }
}

/// How long the move's pods are waited for once their Jobs are deleted.
pub(super) const PODS_GONE: Duration = Duration::from_secs(120);

/// Deletes the Jobs of `names` and waits until their pods are gone (the claims they mount
/// are then free); how many Jobs there were.
pub(super) async fn delete_jobs(
    client: &Client,
    ns: &str,
    names: &Names,
    timeout: Duration,
) -> Result<usize, MoveError> {
    let lp = ListParams::default().labels(&names.selector());
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let jobs = delete_all::<Job>(client, ns, &lp, &dp).await?;
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    loop {
        let left = pods
            .list(&lp)
            .await
            .map_err(kube_err(format!("listing the move's pods in {ns}")))?
            .items;
        if left.is_empty() {
            return Ok(jobs);
        }
        if Instant::now() >= deadline {
            let names: Vec<String> = left.iter().map(ResourceExt::name_any).collect();
            return Err(MoveError::Wait(format!(
                "the Jobs' pods {} were not gone within {timeout:?}",
                names.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_says_its_phase_node_and_what_its_containers_wait_for() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-move-1-send-x"},
            "spec": {"nodeName": "liqo-milan", "containers": []},
            "status": {"phase": "Pending", "containerStatuses": [
                {"name": "send", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        }))
        .unwrap();
        assert_eq!(
            pod_state(&p),
            "pod liqo-move-1-send-x Pending on liqo-milan (send: ContainerCreating)"
        );
        let bare: Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        assert_eq!(pod_state(&bare), "pod p no phase on not scheduled");
    }

    #[test]
    fn the_latest_event_is_by_its_last_time_else_its_event_time() {
        let ev = |last: Option<&str>, at: Option<&str>| -> Event {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "e"}, "involvedObject": {},
                "lastTimestamp": last, "eventTime": at,
            }))
            .unwrap()
        };
        let old = ev(Some("2026-01-01T00:00:00Z"), None);
        let new = ev(None, Some("2026-01-02T00:00:00.000000Z"));
        assert!(event_time(&new) > event_time(&old));
        assert_eq!(event_time(&ev(None, None)), None);
    }
}

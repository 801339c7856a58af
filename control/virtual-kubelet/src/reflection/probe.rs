//! The Warning Events of pod reflection on local pods, and the one-off look-up of a remote
//! name for a foreign Pod (§2.3 step 1: the remote watches only see our labels, so a Pod of
//! that name that is not ours never shows up in a store). It never writes a remote object.

use std::time::Duration;

use control::shadowpod::consumer::is_reflected;
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Resource,
    runtime::events::{Event, EventType},
};

use control::shadowpod::reflection as decide;

use super::{key::Key, shared::Shared};

/// §2.3 step 1 for Pods (the remote watches only see our labels): a ShadowPod of ours whose
/// pod has not appeared after [`decide::PROBE_AFTER`] has its remote name read once; a Pod
/// there that is not ours gets a Warning Event on the local pod. Before, the key comes back
/// at that time. A failing read is logged only (a diagnosis, not a duty).
pub async fn probe(
    shared: &Shared,
    key: &Key,
    local: &Pod,
    ns: &str,
    shadow: Option<&ObjectMeta>,
    delay: Duration,
) {
    if !delay.is_zero() {
        shared.queue.add_after(key.clone(), delay);
        return;
    }
    let uid = shadow.and_then(|s| s.uid.clone()).unwrap_or_default();
    {
        let mut probed = shared.probed.lock().unwrap_or_else(|p| p.into_inner());
        if probed.get(key) == Some(&uid) {
            return;
        }
        probed.insert(key.clone(), uid.clone());
    }
    let api: Api<Pod> = Api::namespaced(shared.cfg.remote.api.clone(), ns);
    match api.get_opt(&key.name).await {
        Ok(Some(p)) => {
            let cfg = &shared.cfg;
            let ours = is_reflected(
                p.metadata.labels.as_ref(),
                &cfg.home.cluster_id,
                &cfg.foreign.cluster_id,
            );
            if !ours && !decide::controlled_by(&p, &uid) {
                let note = decide::not_ours_note("Pod", ns, &key.name);
                warn(shared, key, Some(local), decide::REASON_NOT_OURS, note).await;
            }
        }
        Ok(None) => {
            tracing::debug!(pod = %key, remote = %ns, "no remote pod yet for its ShadowPod");
        }
        Err(e) => {
            tracing::warn!(pod = %key, remote = %ns, error = %e, "reading the remote pod");
        }
    }
}

/// A Warning Event on the local pod (logged too).
pub async fn warn(shared: &Shared, key: &Key, local: Option<&Pod>, reason: &str, note: String) {
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

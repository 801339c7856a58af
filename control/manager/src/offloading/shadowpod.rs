//! The ShadowPod controller on a provider (§2.3, §2.4 of the control-plane spec; upstream
//! `shadowpod-controller`): for each ShadowPod (all namespaces) a Pod of the same name and
//! namespace, with the ShadowPod's labels plus `liqo.io/managed-by=shadowpod`, its
//! annotations, `spec = spec.pod`, and a controller reference to the ShadowPod
//! (blockOwnerDeletion: the garbage collector deletes the pod with it). The pod is created
//! when missing, again after it was deleted or evicted (it watches the pods it owns), also
//! while the consumer is unreachable: the ShadowPod is local.
//!
//! It never updates an existing pod (as upstream: a new spec does not reach a running pod),
//! never touches a pod of that name it does not control (a Warning Event on the ShadowPod
//! says so), and never deletes a pod (the garbage collector does).

use std::{sync::Arc, time::Duration};

use control::{api::virtualkubelet::ShadowPod, consts::reflection};
use k8s_openapi::{
    api::core::v1::Pod,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Api, Resource, ResourceExt, api::PostParams, runtime::controller::Action as Requeue};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "shadowpod";

/// How soon a ShadowPod is observed again while the pod of its name is terminating (or a
/// create found one that the cache had not shown yet).
pub const TERMINATING_AGAIN: Duration = Duration::from_secs(1);

/// The Event reason of a pod of the ShadowPod's name that it does not control.
pub const FOREIGN_POD: &str = "PodNotControlled";

/// The label selector of the pods this controller makes.
pub fn pods_selector() -> String {
    format!(
        "{}={}",
        reflection::MANAGED_BY,
        reflection::MANAGED_BY_SHADOWPOD
    )
}

/// What to do for one ShadowPod.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this pod.
    Create(Box<Pod>),
    /// Observe again after this long (the pod of its name is terminating).
    Again(Duration),
    /// A Warning Event on the ShadowPod (reason, message); nothing else.
    Warn(&'static str, String),
    /// Nothing: its pod stands, or the ShadowPod is being deleted.
    Nothing,
}

/// Whether `pod` is controlled by the ShadowPod of UID `uid`.
pub fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid && o.kind == "ShadowPod")
}

/// The pod of a ShadowPod: same name and namespace, its labels plus
/// `liqo.io/managed-by=shadowpod`, its annotations, its `spec.pod`, controlled by it.
/// `None` when the ShadowPod has no name or UID (never from the API server).
pub fn pod_of(shadow: &ShadowPod) -> Option<Pod> {
    let mut labels = shadow.labels().clone();
    labels.insert(
        reflection::MANAGED_BY.to_owned(),
        reflection::MANAGED_BY_SHADOWPOD.to_owned(),
    );
    let owner = OwnerReference {
        api_version: ShadowPod::api_version(&()).into_owned(),
        kind: ShadowPod::kind(&()).into_owned(),
        name: shadow.meta().name.clone()?,
        uid: shadow.meta().uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let annotations = shadow.annotations().clone();
    Some(Pod {
        metadata: ObjectMeta {
            name: shadow.meta().name.clone(),
            namespace: shadow.meta().namespace.clone(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(shadow.spec.pod.clone()),
        status: None,
    })
}

/// The decision for a ShadowPod given the pod of its name (if any): create it when absent;
/// wait while it terminates; warn when another controls it; else nothing. A ShadowPod being
/// deleted gets nothing (its pod goes with it).
pub fn decide(shadow: &ShadowPod, pod: Option<&Pod>) -> Action {
    if shadow.meta().deletion_timestamp.is_some() {
        return Action::Nothing;
    }
    let uid = shadow.meta().uid.clone().unwrap_or_default();
    match pod {
        None => pod_of(shadow).map_or(Action::Nothing, |p| Action::Create(Box::new(p))),
        Some(p) if p.meta().deletion_timestamp.is_some() => Action::Again(TERMINATING_AGAIN),
        Some(p) if controlled_by(p, &uid) => Action::Nothing,
        Some(p) => Action::Warn(
            FOREIGN_POD,
            format!(
                "Pod {}/{} exists and is not controlled by this ShadowPod: left alone",
                p.namespace().unwrap_or_default(),
                p.name_any()
            ),
        ),
    }
}

/// One reconcile of a ShadowPod.
pub async fn reconcile(shadow: Arc<ShadowPod>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let ns = shadow.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = shadow.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = pods
        .get_opt(&name)
        .await
        .map_err(kerr(format!("get Pod {ns}/{name}")))?;
    match decide(&shadow, pod.as_ref()) {
        Action::Create(pod) => match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {
                tracing::info!(pod = %format!("{ns}/{name}"), "created the pod of a ShadowPod");
                Ok(Requeue::requeue(ctx.settings.resync))
            }
            // One appeared since the read: the next pass observes whose it is.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Requeue::requeue(TERMINATING_AGAIN)),
            Err(e) => Err(kerr(format!("create Pod {ns}/{name}"))(e)),
        },
        Action::Again(after) => Ok(Requeue::requeue(after)),
        Action::Warn(reason, message) => {
            super::event(&ctx, &shadow.object_ref(&()), true, reason, message).await;
            Ok(Requeue::requeue(ctx.settings.resync))
        }
        Action::Nothing => Ok(Requeue::requeue(ctx.settings.resync)),
    }
}

#[cfg(test)]
mod tests;

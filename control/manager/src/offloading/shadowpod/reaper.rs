//! The pods of deleted ShadowPods, deleted at once (`control::shadowpod::provider::reap` says
//! why not only the garbage collector): [`delete_pod`] deletes one (also for the reconcile of
//! a ShadowPod being deleted), [`run`] those of the ShadowPods the watch saw deleted.
//!
//! It never deletes a pod it did not see controlled by the deleted ShadowPod as it was when
//! deleted (UID and resource version are the delete's preconditions; a pod changed since is
//! read again and decided anew, so one orphaned by the garbage collector stays), and a delete
//! that fails is left to the garbage collector, which deletes the pod too.

use std::sync::Arc;

use control::{
    api::virtualkubelet::ShadowPod,
    shadowpod::provider::{Doomed, reap},
};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::PartialObjectMeta,
    runtime::{
        reflector::{ObjectRef, Store},
        watcher,
    },
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
};

/// The reaper's name in metrics (its failed deletes count as its errors) and logs.
pub const NAME: &str = "shadowpod-reaper";

/// How many pods of deleted ShadowPods are deleted at once.
pub const CONCURRENCY: usize = 32;

/// A ShadowPod the watch saw deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    /// Its namespace (its pod's).
    pub namespace: String,
    /// Its name (its pod's).
    pub name: String,
    /// Its UID (its pod's controller).
    pub uid: String,
}

impl Gone {
    /// The ShadowPod `event` says is gone: a watch's `Delete`, or one a re-list implied
    /// (`liqo_auth::relist`).
    pub fn of(
        event: &watcher::Result<watcher::Event<PartialObjectMeta<ShadowPod>>>,
    ) -> Option<Gone> {
        let Ok(watcher::Event::Delete(s)) = event else {
            return None;
        };
        Some(Gone {
            namespace: s.namespace()?,
            name: s.name_any(),
            uid: s.metadata.uid.clone()?,
        })
    }
}

/// What became of the pod of a deleted ShadowPod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Deleted here.
    Deleted,
    /// None was there (deleted already, or never made).
    Absent,
    /// Kept: going already, another's, or orphaned.
    Kept,
    /// It changed twice under the delete: left to the garbage collector.
    Changed,
}

impl Outcome {
    /// The word the log gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Deleted => "deleted",
            Outcome::Absent => "absent",
            Outcome::Kept => "kept (terminating, or not controlled by it)",
            Outcome::Changed => "changed under the delete (left to the garbage collector)",
        }
    }
}

/// Deletes pod `name` (in `pods`' namespace) as `doomed` says it was; one changed since is
/// read once more and, still the pod of the ShadowPod of UID `shadow`, deleted as it is now.
pub async fn delete_pod(
    pods: &Api<Pod>,
    name: &str,
    shadow: &str,
    doomed: Doomed,
) -> Result<Outcome, Error> {
    match try_delete(pods, name, doomed).await? {
        Some(outcome) => Ok(outcome),
        None => {
            let now = pods
                .get_metadata_opt(name)
                .await
                .map_err(kerr(format!("get Pod {name}")))?;
            match reap(shadow, now.as_ref()) {
                Some(doomed) => Ok(try_delete(pods, name, doomed)
                    .await?
                    .unwrap_or(Outcome::Changed)),
                None if now.is_none() => Ok(Outcome::Absent),
                None => Ok(Outcome::Kept),
            }
        }
    }
}

/// One delete under `doomed`'s preconditions; `None` when they no longer hold (409).
async fn try_delete(pods: &Api<Pod>, name: &str, doomed: Doomed) -> Result<Option<Outcome>, Error> {
    let mut params = control::requests::delete_by_uid(doomed.uid);
    if let Some(p) = params.preconditions.as_mut() {
        p.resource_version = doomed.resource_version;
    }
    match pods.delete(name, &params).await {
        Ok(_) => Ok(Some(Outcome::Deleted)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Some(Outcome::Absent)),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(e) => Err(kerr(format!("delete Pod {name}"))(e)),
    }
}

/// Deletes the pod of each ShadowPod in `gone`, at most [`CONCURRENCY`] at once, once the
/// store of owned pods has listed (a pod it does not hold is read once); ends with `gone`, or
/// at `shutdown` (the garbage collector takes the rest). Logs each outcome; a failure also
/// counts as an error of [`NAME`].
pub async fn run(
    gone: impl Stream<Item = Gone>,
    ctx: Arc<Context>,
    owned: Store<PartialObjectMeta<Pod>>,
    owned_listed: liqo_auth::ready::Listed,
    shutdown: impl Future<Output = ()>,
) {
    if !owned_listed.await {
        tracing::warn!("the store of the pods ShadowPods made ended: no pod is deleted here");
        return;
    }
    gone.take_until(shutdown)
        .for_each_concurrent(CONCURRENCY, |g| {
            let (ctx, owned) = (ctx.clone(), owned.clone());
            async move {
                let pod = format!("{}/{}", g.namespace, g.name);
                match one(&ctx, &owned, &g).await {
                    Ok(outcome) => tracing::info!(
                        %pod,
                        outcome = outcome.as_str(),
                        "the pod of a deleted ShadowPod"
                    ),
                    Err(e) => {
                        ctx.metrics.error(NAME);
                        tracing::warn!(
                            %pod, error = %liqo_types::chain(&e),
                            "the pod of a deleted ShadowPod is left to the garbage collector"
                        );
                    }
                }
            }
        })
        .await;
}

/// The pod of `g`, as the store holds it (else as read), deleted if it is still its own.
async fn one(
    ctx: &Context,
    owned: &Store<PartialObjectMeta<Pod>>,
    g: &Gone,
) -> Result<Outcome, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &g.namespace);
    let seen = match owned.get(&ObjectRef::new(&g.name).within(&g.namespace)) {
        Some(p) => Some(p),
        // Not in the store: its create's event not here yet, or gone; read once.
        None => pods
            .get_metadata_opt(&g.name)
            .await
            .map_err(kerr(format!("get Pod {}/{}", g.namespace, g.name)))?
            .map(Arc::new),
    };
    match reap(&g.uid, seen.as_deref()) {
        Some(doomed) => delete_pod(&pods, &g.name, &g.uid, doomed).await,
        None if seen.is_none() => Ok(Outcome::Absent),
        None => Ok(Outcome::Kept),
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;

    fn shadow(ns: Option<&str>, uid: Option<&str>) -> PartialObjectMeta<ShadowPod> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: ns.map(Into::into),
                uid: uid.map(Into::into),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        }
    }

    #[test]
    fn only_a_deletion_with_a_namespace_and_uid_is_gone() {
        let s = shadow(Some("demo"), Some("u"));
        assert_eq!(
            Gone::of(&Ok(watcher::Event::Delete(s.clone()))),
            Some(Gone {
                namespace: "demo".into(),
                name: "web".into(),
                uid: "u".into()
            })
        );
        assert_eq!(Gone::of(&Ok(watcher::Event::Apply(s.clone()))), None);
        assert_eq!(Gone::of(&Ok(watcher::Event::InitApply(s))), None);
        assert_eq!(Gone::of(&Ok(watcher::Event::InitDone)), None);
        let no_uid = shadow(Some("demo"), None);
        assert_eq!(Gone::of(&Ok(watcher::Event::Delete(no_uid))), None);
        let no_ns = shadow(None, Some("u"));
        assert_eq!(Gone::of(&Ok(watcher::Event::Delete(no_ns))), None);
    }
}

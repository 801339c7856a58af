//! A worker of one kind's reflector: takes a key, reads both stores, gathers the kind's inputs
//! ([`super::io::Io`]), decides (`control::reflection::decide`), acts on the provider (field
//! manager `reflection.liqo.io`; applies only over the copy seen, deletions with a UID
//! precondition) or warns on the local object. A failure queues the key again after a growing
//! delay; a copy the provider refuses as invalid is reported on the local object once (the
//! provider's words) and tried again when the local object changes.

use std::sync::Arc;

use control::{
    consts::reflection::FIELD_MANAGER,
    reflection::{Action, REASON_REFUSED, decide, ours},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::{events::EventType, reflector::ObjectRef},
};

use super::{error::HandleError, io::Io, reflector::Reflector};
use crate::reflection::{key::Key, worker::retry_delay};

/// What handling a key came to.
enum Outcome {
    Done,
    /// The provider refused the copy (reported on the local object).
    Refused,
}

/// A worker: handles keys forever.
pub async fn run<K: Io>(r: Arc<Reflector<K, K::Extra>>) -> &'static str {
    loop {
        let key = r.queue.next().await;
        let result = match r.only {
            // This kind runs for one name only (the root CA when ConfigMaps are off).
            Some(only) if key.name != only => Ok(Outcome::Done),
            _ => handle(&r, &key).await,
        };
        K::handled(&r, &key);
        let mut failures = r.failures.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            // A refusal is retried when the local object changes (its event), not before.
            Ok(Outcome::Done | Outcome::Refused) => {
                failures.remove(&key);
            }
            Err(e) => {
                let n = failures.entry(key.clone()).or_insert(0);
                *n = n.saturating_add(1);
                let delay = retry_delay(*n);
                drop(failures);
                tracing::warn!(kind = %K::KIND, object = %key, error = %liqo_types::chain(&e), retry_in = ?delay, "reflection failed");
                r.queue.add_after(key.clone(), delay);
            }
        }
        r.queue.done(&key);
    }
}

fn kerr(what: String) -> impl FnOnce(kube::Error) -> HandleError {
    move |source| match &source {
        kube::Error::Api(s) if matches!(s.code, 400 | 422) => HandleError::Refused { what, source },
        _ => HandleError::Kube { what, source },
    }
}

/// One key: read, decide, act.
async fn handle<K: Io>(r: &Reflector<K, K::Extra>, key: &Key) -> Result<Outcome, HandleError> {
    // Not offloaded (any more), or not listed yet: queued again once it is.
    let Some(pair) = r.pair(&key.namespace) else {
        return Ok(Outcome::Done);
    };
    if !pair.ready() {
        return Ok(Outcome::Done);
    }
    let local = pair
        .local
        .get(&ObjectRef::new(&key.name).within(&key.namespace));
    let ctx = r.ctx(&key.namespace, &pair.remote);
    let remote_name = K::remote_name(&key.name, &ctx);
    let remote = pair
        .remote_objects
        .get(&ObjectRef::new(&remote_name).within(&pair.remote));
    let remote_ours = remote.as_deref().is_some_and(|o| ours(o, &ctx));
    let inputs = K::inputs(r, key, local.as_deref(), remote.as_deref()).await?;
    let action = decide(local.as_deref(), remote.as_deref(), &ctx, &inputs);
    let api: Api<K> = Api::namespaced(r.cfg.remote.api.clone(), &pair.remote);
    let what = |verb: &str| format!("{verb} {} {}/{remote_name}", K::KIND, pair.remote);
    let written = match action {
        Action::Nothing => {
            if remote_ours {
                K::written(r, key).await;
            } else {
                K::released(r, key, None).await;
            }
            return Ok(Outcome::Done);
        }
        Action::Wait(why) => {
            // Queued again by what it waits for (a Service queues its slices).
            tracing::debug!(kind = %K::KIND, object = %key, why, "waiting");
            return Ok(Outcome::Done);
        }
        Action::Warn { reason, note, .. } => {
            warn(r, local.as_deref(), reason, note).await;
            if !remote_ours {
                K::released(r, key, None).await;
            }
            return Ok(Outcome::Done);
        }
        // The copy under this name belongs to another local object (a refused look-alike of
        // the root CA's copy, deleted): not this key's to delete.
        Action::Delete { name, .. } if K::local_name(&name, &ctx).as_deref() != Some(&key.name) => {
            return Ok(Outcome::Done);
        }
        Action::Delete { name, uid } => {
            let dp = control::requests::delete_by_uid(uid);
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                // Already gone, or replaced (the UID precondition): nothing of ours to delete.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(kerr(what("deleting"))(e)),
            }
            K::released(r, key, remote.as_deref()).await;
            "deleted"
        }
        Action::Create(copy) => {
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            match api.create(&pp, &copy).await {
                Ok(created) => {
                    own_as_applied(&api, &created).await;
                    K::written(r, key).await;
                    "created"
                }
                // Not in the store yet: its event queues the key again.
                Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Outcome::Done),
                Err(e) => return refused(r, local.as_deref(), kerr(what("creating"))(e)).await,
            }
        }
        Action::Apply(mut copy) => {
            // Only over the copy seen: another object under the name now gets a 409.
            copy.meta_mut().uid = remote.as_deref().and_then(|o| o.meta().uid.clone());
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            match api.patch(&remote_name, &pp, &Patch::Apply(&*copy)).await {
                Ok(_) => {
                    K::written(r, key).await;
                    "updated"
                }
                // Not the copy seen any more (409, or 422 on metadata.uid): its event comes.
                Err(kube::Error::Api(s))
                    if s.code == 409 || (s.code == 422 && s.message.contains("metadata.uid")) =>
                {
                    return Ok(Outcome::Done);
                }
                Err(e) => return refused(r, local.as_deref(), kerr(what("applying"))(e)).await,
            }
        }
    };
    tracing::info!(kind = %K::KIND, object = %key, remote = %pair.remote, "copy {written}");
    Ok(Outcome::Done)
}

/// A copy the provider refused as invalid is reported on the local object, once (tried again
/// when the local object changes); any other error is retried.
async fn refused<K: Io>(
    r: &Reflector<K, K::Extra>,
    local: Option<&K>,
    e: HandleError,
) -> Result<Outcome, HandleError> {
    match &e {
        HandleError::Refused { what, source } => {
            let note = format!("the provider refused the copy ({what}): {source}");
            warn(r, local, REASON_REFUSED, note).await;
            Ok(Outcome::Refused)
        }
        _ => Err(e),
    }
}

/// Turns the creation's field ownership (an `Update` by our manager) into our `Apply`, so that
/// a field later removed locally is removed from the copy by the next apply (only if nothing
/// changed the copy since: the resourceVersion is a precondition). A failure is logged: such
/// removals then wait until the copy is made again.
async fn own_as_applied<K: Io>(api: &Api<K>, created: &K) {
    let meta = created.meta();
    let mut fields = meta.managed_fields.clone().unwrap_or_default();
    let mut changed = false;
    for f in &mut fields {
        if f.manager.as_deref() == Some(FIELD_MANAGER) && f.operation.as_deref() == Some("Update") {
            f.operation = Some("Apply".into());
            changed = true;
        }
    }
    let Some(name) = meta.name.as_deref().filter(|_| changed) else {
        return;
    };
    let patch = serde_json::json!({"metadata": {
        "managedFields": fields, "resourceVersion": meta.resource_version}});
    if let Err(e) = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(kind = %K::KIND, %name, error = %e, "taking the copy's fields as applied");
    }
}

/// A Warning Event on the local object (logged too).
pub async fn warn<K: Io>(
    r: &Reflector<K, K::Extra>,
    local: Option<&K>,
    reason: &str,
    note: String,
) {
    tracing::warn!(kind = %K::KIND, %note, "reflection skipped");
    let Some(local) = local else { return };
    super::event::publish(
        &r.recorder,
        &local.object_ref(&()),
        EventType::Warning,
        reason,
        note,
    )
    .await;
}

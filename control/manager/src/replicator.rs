//! The CRD replicator's I/O (§1.3): per ForeignCluster with both tenant namespaces known,
//! for each kind, lists our sources and the peer's copies (through the peer client of the
//! identity manager), runs [`control::peering::replicate`], writes the result; keeps a watch on
//! the peer's copies (`liqo.io/originID=<us>,liqo.io/replicated=true` in its tenant namespace
//! for us) for each kind it replicates, feeding the controller's trigger. A deleted
//! ForeignCluster whose peer cannot be asked (silent, no identity, its tenant namespace for us
//! unknown) has its deleted sources let go after a while ([`let_go`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use control::{
    api::{ClusterId, discovery::ForeignCluster},
    consts::{finalizers, labels, values},
    phase::{PeeringPhase, ReplicatedKind},
};
use futures::{StreamExt, channel::mpsc::UnboundedSender};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
    core::ApiResource,
    runtime::{WatchStreamExt, controller::Action as Requeue, watcher},
};
use serde_json::json;
use tokio::task::AbortHandle;

use crate::{
    FIELD_MANAGER,
    context::Context,
    error::{Error, kube as kerr},
    identity::PeerClient,
    kit::not_found,
    kit::{set_finalizers, with_finalizer},
};
use control::peering::replicate::{self, Action, Replica, Source};

mod let_go;
mod objects;
pub use let_go::REASON_LET_GO;
use let_go::{Silence, let_go, remove_finalizer};
use objects::{removed, replica, source};

/// The controller's name in metrics and logs.
pub const NAME: &str = "replicator";

/// The replicator's state: its watches on the peers, and since when each peer is silent.
pub struct Replicator {
    /// Shared context.
    pub ctx: Arc<Context>,
    watches: Mutex<HashMap<(ClusterId, ReplicatedKind), (String, AbortHandle)>>,
    trigger: UnboundedSender<()>,
    silence: Silence,
}

impl Replicator {
    /// A replicator whose remote watches send to `trigger`.
    pub fn new(ctx: Arc<Context>, trigger: UnboundedSender<()>) -> Self {
        Replicator {
            ctx,
            watches: Mutex::new(HashMap::new()),
            trigger,
            silence: Silence::default(),
        }
    }

    fn watches(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(ClusterId, ReplicatedKind), (String, AbortHandle)>>
    {
        // Inserts and removes only: a poisoned map is still consistent.
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps one watch per (peer, kind) on `api` (keyed also by `version`, so a new identity
    /// restarts it).
    fn watch(
        &self,
        peer: &ClusterId,
        kind: ReplicatedKind,
        version: String,
        api: Api<DynamicObject>,
        selector: String,
    ) {
        let mut watches = self.watches();
        if let Some((v, _)) = watches.get(&(peer.clone(), kind))
            && *v == version
        {
            return;
        }
        let trigger = self.trigger.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default().labels(&selector))
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                if let Err(e) = event {
                    tracing::debug!(error = %e, "remote watch");
                }
                if trigger.unbounded_send(()).is_err() {
                    return;
                }
            }
        });
        if let Some((_, old)) = watches.insert((peer.clone(), kind), (version, task.abort_handle()))
        {
            old.abort();
        }
    }

    fn unwatch(&self, peer: &ClusterId, kind: ReplicatedKind) {
        if let Some((_, task)) = self.watches().remove(&(peer.clone(), kind)) {
            task.abort();
        }
    }
}

/// One reconcile of a ForeignCluster: every kind replicated to (or withdrawn from) its peer.
pub async fn reconcile(fc: Arc<ForeignCluster>, r: Arc<Replicator>) -> Result<Requeue, Error> {
    let ctx = &r.ctx;
    ctx.metrics.reconcile(NAME);
    let requeue = Requeue::requeue(ctx.settings.resync);
    let peer = fc.spec.cluster_identity.cluster_id.clone();
    let tenants = fc.status.as_ref().and_then(|s| s.tenant_namespace.clone());
    let (local_ns, remote_ns) = tenants.map_or((None, None), |t| (t.local, t.remote));
    // A deleted ForeignCluster with no source left has nothing to ask the peer: its finalizer
    // goes without a call that may hang on a peer already out of reach (an in-band peer
    // whose tunnel is gone).
    let done = fc.metadata.deletion_timestamp.is_some()
        && match &local_ns {
            Some(ns) => count_sources(ctx, ns, &peer).await? == 0,
            None => true,
        };
    let deleting = fc.metadata.deletion_timestamp.is_some();
    let remote = match (&local_ns, &remote_ns) {
        (Some(local_ns), Some(_)) if !done => ctx
            .peers
            .client(&ctx.client, local_ns, &peer)
            .await
            .map_err(|e| Error::Identity(Box::new(e)))?,
        _ => None,
    };
    let mut requeue = requeue;
    let (sources_left, failed) = match (&local_ns, &remote_ns, &remote) {
        (Some(local_ns), Some(remote_ns), Some(remote)) => {
            replicate_all(&r, &fc, local_ns, remote_ns, remote).await?
        }
        // Deleted and the peer cannot be asked: a silence; its sources wait, then are let go.
        (Some(local_ns), _, _) if deleting && !done => {
            let why = match remote_ns {
                Some(_) => "we hold no signed identity for it",
                None => "its tenant namespace for us is not known",
            };
            let silent_for = r.silence.failed(&peer, &fc);
            let mut n = 0;
            let mut failed = None;
            for kind in ReplicatedKind::ALL {
                let ar = kind.api_resource();
                let local = Api::namespaced_with(ctx.client.clone(), local_ns, &ar);
                let sources = list_sources(&local, &peer, local_ns, &ar).await?;
                n += sources.len();
                // One kind failing does not hold the others back.
                match let_go(ctx, &fc, &ar, &local, &sources, silent_for, why).await {
                    // Back when the wait is over, not a resync later.
                    Ok(Some(w)) => {
                        let at = (w + Duration::from_secs(1)).min(ctx.settings.resync);
                        requeue = Requeue::requeue(at);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            (n, failed)
        }
        (Some(local_ns), _, _) => (count_sources(ctx, local_ns, &peer).await?, None),
        _ => (0, None),
    };
    let has = fc
        .finalizers()
        .iter()
        .any(|f| f == finalizers::CRD_REPLICATOR);
    if let Some(add) = replicate::fc_finalizer(deleting, has, remote.is_some(), sources_left) {
        let list = with_finalizer(fc.finalizers(), finalizers::CRD_REPLICATOR, add);
        if !add {
            for kind in ReplicatedKind::ALL {
                r.unwatch(&peer, kind);
            }
            r.silence.answered(&peer);
            ctx.peers.forget(&peer);
        }
        let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
        set_finalizers(&api, &fc.name_any(), fc.resource_version().as_deref(), list).await?;
    }
    // One kind failing does not hold the others back; the first error requeues.
    failed.map_or(Ok(requeue), Err)
}

fn source_selector(peer: &ClusterId) -> String {
    format!(
        "{}={},{}={peer}",
        labels::REPLICATION,
        values::TRUE,
        labels::REMOTE_ID
    )
}

/// Our sources of one kind for a peer.
async fn list_sources(
    local: &Api<DynamicObject>,
    peer: &ClusterId,
    local_ns: &str,
    ar: &ApiResource,
) -> Result<Vec<DynamicObject>, Error> {
    Ok(local
        .list(&ListParams::default().labels(&source_selector(peer)))
        .await
        .map_err(kerr(format!("list {} sources in {local_ns}", ar.kind)))?
        .items)
}

/// Our sources for a peer, of every kind.
async fn count_sources(ctx: &Context, local_ns: &str, peer: &ClusterId) -> Result<usize, Error> {
    let mut n = 0;
    for kind in ReplicatedKind::ALL {
        let ar = kind.api_resource();
        let local: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), local_ns, &ar);
        n += list_sources(&local, peer, local_ns, &ar).await?.len();
    }
    Ok(n)
}

/// Every kind replicated to (or withdrawn from) the peer: how many sources there were, and
/// the first error of a kind.
async fn replicate_all(
    r: &Replicator,
    fc: &ForeignCluster,
    local_ns: &str,
    remote_ns: &str,
    remote: &PeerClient,
) -> Result<(usize, Option<Error>), Error> {
    let ctx = &r.ctx;
    let peer = fc.spec.cluster_identity.cluster_id.clone();
    let phase = PeeringPhase::of_status(fc.status.as_ref());
    let us = ctx.local.cluster_id.to_string();
    let deleting = fc.metadata.deletion_timestamp.is_some();
    let mut failed = None;
    // Every kind's sources first: whether one kind waits for the others ([`replicate::holds`]).
    let mut listed = Vec::new();
    for kind in ReplicatedKind::ALL {
        let ar = kind.api_resource();
        let local: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), local_ns, &ar);
        let sources = list_sources(&local, &peer, local_ns, &ar).await?;
        listed.push((kind, ar, local, sources));
    }
    let sources_left: usize = listed.iter().map(|(.., s)| s.len()).sum();
    for (kind, ar, local, sources) in listed {
        let allowed = kind.replicated(phase, fc.spec.networking_enabled);
        let others = sources_left - sources.len();
        let deletions = replicate::holds(kind, fc.spec.in_band(), deleting, others);
        if !allowed {
            r.unwatch(&peer, kind);
            if sources.is_empty() {
                continue;
            }
        }
        let remote_api: Api<DynamicObject> =
            Api::namespaced_with(remote.api.clone(), remote_ns, &ar);
        let selector = format!(
            "{}={us},{}={}",
            labels::ORIGIN_ID,
            labels::REPLICATED,
            values::TRUE
        );
        let answer = remote_api
            .list(&ListParams::default().labels(&selector))
            .await;
        // Any answer, a refusal too, ends a silence.
        if !matches!(&answer, Err(e) if !matches!(e, kube::Error::Api(_))) {
            r.silence.answered(&peer);
        }
        let replicas = match answer {
            Ok(list) => list.items,
            // The peer has not granted this kind yet (its phase lags ours) and we have
            // nothing to copy: nothing to do until it does.
            Err(kube::Error::Api(s)) if s.code == 403 && sources.is_empty() => {
                r.unwatch(&peer, kind);
                continue;
            }
            // Withdrawn on both sides: the peer revoked our right to its copies (its phase
            // moved on as ours did), so it deletes them itself (the network manager deletes a
            // peer's NetworkConfig copy on teardown); our sources are let go.
            Err(kube::Error::Api(s)) if s.code == 403 && !allowed => {
                r.unwatch(&peer, kind);
                Vec::new()
            }
            Err(e) => {
                // Deleted, and the peer does not answer (not an answer it refused): after a
                // while our sources stop waiting for it.
                if !matches!(e, kube::Error::Api(_)) {
                    let silent_for = r.silence.failed(&peer, fc);
                    let why = liqo_types::chain(&e);
                    if deleting
                        && let Err(e) =
                            let_go(ctx, fc, &ar, &local, &sources, silent_for, &why).await
                    {
                        failed.get_or_insert(e);
                    }
                }
                failed.get_or_insert(kerr(format!(
                    "list {} copies at {peer} in {remote_ns}",
                    ar.kind
                ))(e));
                continue;
            }
        };
        if allowed {
            r.watch(
                &peer,
                kind,
                remote_ns.to_owned(),
                Api::namespaced_with(remote.watch.clone(), remote_ns, &ar),
                selector.clone(),
            );
        }
        let by_name: HashMap<String, &DynamicObject> =
            sources.iter().map(|o| (o.name_any(), o)).collect();
        let observed: Vec<Source> = sources.iter().map(source).collect();
        let copies: Vec<Replica> = replicas.iter().map(replica).collect();
        for action in replicate::decide(allowed, deletions, &us, &observed, &copies) {
            if let Err(e) = execute(&ar, &local, &remote_api, remote_ns, &by_name, action).await {
                failed.get_or_insert(e);
                break;
            }
        }
    }
    Ok((sources_left, failed))
}

async fn execute(
    ar: &ApiResource,
    local: &Api<DynamicObject>,
    remote: &Api<DynamicObject>,
    remote_ns: &str,
    sources: &HashMap<String, &DynamicObject>,
    action: Action,
) -> Result<(), Error> {
    match action {
        Action::AddFinalizer(name) | Action::RemoveFinalizer(name)
            if !sources.contains_key(&name) =>
        {
            Ok(())
        }
        Action::AddFinalizer(name) => {
            let o = sources[name.as_str()];
            let list = with_finalizer(o.finalizers(), finalizers::CRD_REPLICATOR, true);
            set_finalizers(local, &name, o.resource_version().as_deref(), list).await
        }
        Action::RemoveFinalizer(name) => remove_finalizer(local, sources[name.as_str()]).await,
        Action::ApplyReplica(d) => {
            // Keys the copy loses go first by a merge patch: a server-side apply that empties
            // an object it owned leaves it null, which the CRD's schema refuses.
            let old = remote
                .get_opt(&d.name)
                .await
                .map_err(kerr(format!("get {} copy {remote_ns}/{}", ar.kind, d.name)))?;
            if let Some(gone) = old.and_then(|o| removed(o.data.get("spec")?, &d.spec)) {
                let patch = json!({ "spec": gone });
                remote
                    .patch(&d.name, &crate::kit::merge_params(), &Patch::Merge(&patch))
                    .await
                    .map_err(kerr(format!(
                        "prune {} copy {remote_ns}/{}",
                        ar.kind, d.name
                    )))?;
            }
            let object = json!({
                "apiVersion": ar.api_version, "kind": ar.kind,
                "metadata": {"name": d.name, "namespace": remote_ns,
                    "labels": d.labels, "annotations": d.annotations},
                "spec": d.spec,
            });
            remote
                .patch(
                    &d.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&object),
                )
                .await
                .map(drop)
                .map_err(kerr(format!(
                    "apply {} copy {remote_ns}/{}",
                    ar.kind, d.name
                )))
        }
        Action::DeleteReplica(name) => remote
            .delete(&name, &DeleteParams::default())
            .await
            .map(drop)
            .or_else(not_found)
            .map_err(kerr(format!("delete {} copy {remote_ns}/{name}", ar.kind))),
        Action::StatusBack(name, status) => {
            // As for a copy's spec: what the status loses goes by a merge patch first.
            let had = sources.get(&name).and_then(|o| o.data.get("status"));
            if let Some(gone) = had.and_then(|old| removed(old, &status)) {
                let patch = json!({ "status": gone });
                local
                    .patch_status(&name, &crate::kit::merge_params(), &Patch::Merge(&patch))
                    .await
                    .map_err(kerr(format!("prune status of {} {name}", ar.kind)))?;
            }
            let object = json!({"apiVersion": ar.api_version, "kind": ar.kind, "status": status});
            local
                .patch_status(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&object),
                )
                .await
                .map(drop)
                .map_err(kerr(format!("status of {} {name}", ar.kind)))
        }
    }
}

/// Events of our sources of every kind (any namespace, `liqo.io/replication=true`), one `()`
/// per event, for the controller's trigger.
pub fn local_sources(client: Client) -> impl futures::Stream<Item = ()> + Send {
    let streams = ReplicatedKind::ALL.into_iter().map(move |kind| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        let selector = format!("{}={}", labels::REPLICATION, values::TRUE);
        watcher(api, watcher::Config::default().labels(&selector))
            .default_backoff()
            .map(|_| ())
            .boxed()
    });
    futures::stream::select_all(streams)
}

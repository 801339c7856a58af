//! The replicator's let-go ([`control::peering::replicate::let_go`]) for a deleted
//! ForeignCluster whose peer does not answer: how long each peer has been silent (every
//! request since failed without an answer; in memory, so a restart starts the count again),
//! and the sources released, each with a Warning Event [`REASON_LET_GO`] on the
//! ForeignCluster naming the copy that may be left at the peer.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use control::{
    api::{ClusterId, discovery::ForeignCluster},
    consts::finalizers,
    peering::replicate::{self, Action, Source},
};
use kube::{Api, Resource, ResourceExt, api::DynamicObject, core::ApiResource};

use super::objects::source;
use crate::{
    context::Context,
    error::Error,
    kit::{set_finalizers, with_finalizer},
};

/// The reason of the Warning Event on a deleted ForeignCluster whose source was let go
/// (its copy at the peer not confirmed gone).
pub const REASON_LET_GO: &str = "ReplicaLetGo";

/// Since when each peer has not answered, for which ForeignCluster (its UID: a silence
/// seen under an earlier ForeignCluster of the same cluster does not count for a new one).
#[derive(Default)]
pub(super) struct Silence(Mutex<HashMap<ClusterId, (Option<String>, Instant)>>);

impl Silence {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClusterId, (Option<String>, Instant)>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request to `peer` (of `fc`) got no answer: how long it has been silent.
    pub(super) fn failed(&self, peer: &ClusterId, fc: &ForeignCluster) -> Duration {
        let uid = fc.uid();
        let mut map = self.lock();
        let entry = map
            .entry(peer.clone())
            .or_insert_with(|| (uid.clone(), Instant::now()));
        if entry.0 != uid {
            *entry = (uid, Instant::now());
        }
        entry.1.elapsed()
    }

    /// `peer` answered (or is forgotten).
    pub(super) fn answered(&self, peer: &ClusterId) {
        self.lock().remove(peer);
    }
}

/// How long the sources of a deleted `fc` wait for its silent peer: the network's release
/// grace (`--network-release-grace`), at most 30 s in-band.
fn after(ctx: &Context, fc: &ForeignCluster) -> Duration {
    let grace = ctx
        .network
        .as_ref()
        .map_or(crate::network::DEFAULT_GRACE, |m| m.config.grace);
    replicate::let_go_after(fc.spec.in_band(), grace)
}

/// The sources of one kind of a deleted `fc` whose peer has been silent for `silent_for`
/// (`why`): those let go lose our finalizer, each with its Event. Returns how long the
/// others being deleted still wait (`None`: none waits).
pub(super) async fn let_go(
    ctx: &Context,
    fc: &ForeignCluster,
    ar: &ApiResource,
    local: &Api<DynamicObject>,
    sources: &[DynamicObject],
    silent_for: Duration,
    why: &str,
) -> Result<Option<Duration>, Error> {
    let after = after(ctx, fc);
    let observed: Vec<Source> = sources.iter().map(source).collect();
    let released = replicate::let_go(&observed, silent_for, after);
    if released.is_empty() {
        let waiting = observed.iter().any(|s| s.deleting && s.has_finalizer);
        return Ok(waiting.then(|| after.saturating_sub(silent_for)));
    }
    let by_name: HashMap<String, &DynamicObject> =
        sources.iter().map(|o| (o.name_any(), o)).collect();
    let peer = &fc.spec.cluster_identity.cluster_name;
    for action in released {
        let Action::RemoveFinalizer(name) = &action else {
            continue;
        };
        let note = format!(
            "let go of {} {name}: {peer} has not answered for {} s ({why}); its copy there may be left",
            ar.kind,
            silent_for.as_secs()
        );
        tracing::warn!(peer = %peer, "{note}");
        remove_finalizer(local, by_name[name.as_str()]).await?;
        crate::kit::event(ctx, &fc.object_ref(&()), true, REASON_LET_GO, note).await;
    }
    Ok(None)
}

/// Our finalizer off a source (already gone: done).
pub(super) async fn remove_finalizer(
    local: &Api<DynamicObject>,
    o: &DynamicObject,
) -> Result<(), Error> {
    let list = with_finalizer(o.finalizers(), finalizers::CRD_REPLICATOR, false);
    set_finalizers(local, &o.name_any(), o.resource_version().as_deref(), list)
        .await
        .or_else(|e| if e.is_not_found() { Ok(()) } else { Err(e) })
}

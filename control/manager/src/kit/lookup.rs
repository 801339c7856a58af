//! Lookups and courtesies that need the controllers' context: a peer's ForeignCluster by
//! cluster ID, whether a replicated copy speaks for its tenant namespace's peer (warned about
//! once when not), and publishing an Event.

use std::{collections::BTreeSet, sync::Mutex};

use control::api::discovery::ForeignCluster;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::{
    Api, ResourceExt,
    runtime::events::{Event, EventType, Recorder, Reporter},
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
};
use control::peering::request as decide;

/// The objects already warned about as untrusted (by UID), so each is logged once.
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Whether a replicated copy (`kind`, in tenant namespace `ns`, labelled `liqo.io/originID` =
/// `origin`, its spec naming `claimed`) speaks for the peer whose tenant namespace holds it
/// ([`decide::origin`]); an untrusted copy is warned about once and must not be acted upon.
pub async fn trusted(
    ctx: &Context,
    kind: &str,
    meta: &kube::api::ObjectMeta,
    ns: &str,
    origin: Option<&str>,
    claimed: &control::api::ClusterId,
) -> Result<bool, Error> {
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let namespace = namespaces
        .get_opt(ns)
        .await
        .map_err(kerr(format!("get Namespace {ns}")))?;
    let Err(why) = decide::origin(namespace.as_ref().map(|n| n.labels()), origin, claimed) else {
        return Ok(true);
    };
    let uid = meta.uid.clone().unwrap_or_default();
    // A poisoned memo only means a warning may repeat.
    let first = WARNED.lock().map(|mut w| w.insert(uid)).unwrap_or(true);
    if first {
        let name = meta.name.as_deref().unwrap_or_default();
        tracing::warn!(
            kind, namespace = ns, name, claimed = %claimed, origin = ?origin, reason = ?why,
            "ignoring a replicated object that does not come from its tenant namespace's peer"
        );
    }
    Ok(false)
}

/// The ForeignCluster of a peer ([`super::find_foreign_cluster`]).
pub async fn foreign_cluster(
    ctx: &Context,
    id: &control::api::ClusterId,
) -> Result<Option<ForeignCluster>, Error> {
    super::find_foreign_cluster(&ctx.client, id)
        .await
        .map_err(kerr("list ForeignClusters"))
}

/// Publishes an Event about `object`. An Event is a courtesy on top of the status: its failure
/// is logged, never retried (a retry would repeat the writes it reports).
pub async fn event(
    ctx: &Context,
    object: &ObjectReference,
    warning: bool,
    reason: &str,
    note: String,
) {
    let recorder = Recorder::new(
        ctx.client.clone(),
        Reporter {
            controller: crate::FIELD_MANAGER.into(),
            instance: None,
        },
    );
    let kind = if warning {
        EventType::Warning
    } else {
        EventType::Normal
    };
    publish(&recorder, object, kind, reason, note).await;
}

/// Publishes an Event with `recorder`; a failure is logged, never retried (an Event is a
/// courtesy on top of the status or the annotation and the log; a retry would repeat the writes
/// it reports).
pub async fn publish(
    recorder: &Recorder,
    object: &ObjectReference,
    kind: EventType,
    reason: &str,
    note: String,
) {
    let ev = Event {
        type_: kind,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, object).await {
        tracing::warn!(error = %e, reason, "publishing an Event failed");
    }
}

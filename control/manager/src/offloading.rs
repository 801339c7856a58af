//! Namespace offloading's I/O in the controller-manager (issue 15): [`node`], the virtual
//! node of an accepted offer (applied, kept Ready by its Lease) until the virtual kubelet
//! takes it over; [`vnode`], the virtual-node controller (a NamespaceMap per virtual node);
//! [`consumer`], the NamespaceOffloading controller; [`provider`], the NamespaceMap
//! controller on a provider. The decisions of the offloading controllers are
//! `control::offloading`'s; this module only observes and carries them out, and never serves
//! admission reviews (`crate::webhook` does).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::context::Context;

pub mod consumer;
pub mod node;
pub mod provider;
pub mod vnode;

/// Publishes an Event about `object`. An Event is a courtesy on top of the status: its failure
/// is logged, never retried (a retry would repeat the writes it reports).
pub(crate) async fn event(
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
    let ev = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, object).await {
        tracing::warn!(error = %e, reason, "publishing an Event failed");
    }
}

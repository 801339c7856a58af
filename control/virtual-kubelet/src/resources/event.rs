//! An Event on a local object from resource reflection (a refusal, a copy deleted): the note
//! cut to what the API takes; a failure to publish is logged, never retried (an Event is a
//! courtesy on top of the log).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// The longest note an Event takes (events.k8s.io/v1: 1 kB).
const NOTE_MAX: usize = 1000;

/// Publishes an Event about the local object `local` (its reference: it may be gone already).
pub async fn publish(
    recorder: &Recorder,
    local: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let mut note = note;
    if note.len() > NOTE_MAX {
        let mut end = NOTE_MAX;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Reflect".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, local).await {
        tracing::warn!(%reason, error = %e, "publishing an event");
    }
}

//! Events back home (§2.3, issue 29): what the provider says about a remote pod (pulled,
//! started, killed, failed mounts) becomes an Event on the home pod, so that `kubectl describe
//! pod` at home shows it. Which remote Events are mirrored ([`mirror`]) and how many per pod
//! ([`Limiter`]: a token bucket per pod, time as an input). Pure: the virtual kubelet watches
//! and publishes.

use std::{
    collections::HashMap,
    hash::Hash,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Event;

/// How many Events a pod may get at once.
pub const BURST: u32 = 10;
/// How often a pod earns one more.
pub const REFILL: Duration = Duration::from_secs(6);
/// The longest note mirrored (events.k8s.io takes 1 kB).
pub const NOTE_MAX: usize = 1000;
/// The reasons never mirrored: the provider's scheduler placing the remote pod
/// (`Scheduled`). The home pod has its own, onto the virtual node, which stands for the
/// provider: the provider's node names are its own business, and a second `Scheduled` per
/// pod would be one more write to the home API server for every offloaded pod.
pub const NOT_MIRRORED: &[&str] = &["Scheduled"];

/// The field selector of the watch on a remote namespace's Events: those about pods, without
/// the reasons never mirrored (the API server keeps them, not just the mirror).
pub fn watch_fields() -> String {
    let mut fields = String::from("involvedObject.kind=Pod");
    for reason in NOT_MIRRORED {
        fields.push_str(",reason!=");
        fields.push_str(reason);
    }
    fields
}

/// An Event to publish on the home pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// The remote Event's reason.
    pub reason: String,
    /// Its note, naming the provider.
    pub note: String,
    /// What was done (the reason when the remote Event says nothing).
    pub action: String,
}

/// The Event to publish on the home pod for the remote Event `e` about the remote pod of the
/// same name, from the provider `provider`; `None` for an Event about something else,
/// without a reason or with a reason of [`NOT_MIRRORED`].
pub fn mirror(e: &Event, pod: &str, provider: &str) -> Option<Mirror> {
    let o = &e.involved_object;
    if o.kind.as_deref() != Some("Pod") || o.name.as_deref() != Some(pod) {
        return None;
    }
    let reason = e
        .reason
        .clone()
        .filter(|r| !r.is_empty() && !NOT_MIRRORED.contains(&r.as_str()))?;
    let mut note = format!("[{provider}] {}", e.message.as_deref().unwrap_or_default());
    if note.len() > NOTE_MAX {
        let mut end = NOTE_MAX;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    Some(Mirror {
        warning: e.type_.as_deref() == Some("Warning"),
        action: e
            .action
            .clone()
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| reason.clone()),
        reason,
        note,
    })
}

/// A token bucket per key: [`BURST`] at once, one more each [`REFILL`].
#[derive(Debug, Default)]
pub struct Limiter<K> {
    buckets: HashMap<K, (f64, Instant)>,
}

impl<K: Eq + Hash + Clone> Limiter<K> {
    /// Whether `key` may have one more Event at `now` (takes it if so).
    pub fn allow(&mut self, key: &K, now: Instant) -> bool {
        let (tokens, at) = self
            .buckets
            .entry(key.clone())
            .or_insert((f64::from(BURST), now));
        let earned = now.saturating_duration_since(*at).as_secs_f64() / REFILL.as_secs_f64();
        *tokens = (*tokens + earned).min(f64::from(BURST));
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forgets `key` (its pod is gone).
    pub fn forget(&mut self, key: &K) {
        self.buckets.remove(key);
        crate::lean::shrink::shrink(&mut self.buckets);
    }

    /// Forgets the keys full again at `now` (they would start full anyway): bounds the map.
    pub fn prune(&mut self, now: Instant) {
        self.buckets.retain(|_, (tokens, at)| {
            let earned = now.saturating_duration_since(*at).as_secs_f64() / REFILL.as_secs_f64();
            *tokens + earned < f64::from(BURST)
        });
        crate::lean::shrink::shrink(&mut self.buckets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, name: &str, type_: &str, reason: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "e1", "namespace": "demo-rome"},
            "involvedObject": {"kind": kind, "name": name, "namespace": "demo-rome"},
            "type": type_, "reason": reason, "message": "Successfully pulled image \"nginx\""
        }))
        .unwrap()
    }

    #[test]
    fn events_about_the_pod_are_mirrored_naming_the_provider() {
        let m = mirror(&event("Pod", "web", "Normal", "Pulled"), "web", "milan").unwrap();
        assert_eq!(m.reason, "Pulled");
        assert_eq!(m.action, "Pulled");
        assert!(!m.warning);
        assert_eq!(m.note, "[milan] Successfully pulled image \"nginx\"");
        let w = mirror(
            &event("Pod", "web", "Warning", "FailedMount"),
            "web",
            "milan",
        )
        .unwrap();
        assert!(w.warning);
    }

    #[test]
    fn other_objects_other_pods_reasonless_and_scheduling_events_are_not() {
        assert!(mirror(&event("ShadowPod", "web", "Normal", "X"), "web", "milan").is_none());
        assert!(mirror(&event("Pod", "db", "Normal", "X"), "web", "milan").is_none());
        assert!(mirror(&event("Pod", "web", "Normal", ""), "web", "milan").is_none());
        assert!(
            mirror(&event("Pod", "web", "Normal", "Scheduled"), "web", "milan").is_none(),
            "the provider's scheduling is not mirrored"
        );
    }

    #[test]
    fn the_watch_asks_for_pod_events_without_the_reasons_never_mirrored() {
        assert_eq!(watch_fields(), "involvedObject.kind=Pod,reason!=Scheduled");
    }

    #[test]
    fn a_long_note_is_cut_at_a_character_boundary() {
        let mut e = event("Pod", "web", "Warning", "Failed");
        e.message = Some("é".repeat(800));
        let m = mirror(&e, "web", "milan").unwrap();
        assert!(
            m.note.len() <= NOTE_MAX && m.note.len() > NOTE_MAX - 2,
            "{}",
            m.note.len()
        );
    }

    #[test]
    fn the_limiter_allows_a_burst_then_one_per_refill_per_key() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        let allowed = (0..BURST + 5).filter(|_| l.allow(&"a", t0)).count();
        assert_eq!(allowed, BURST as usize);
        assert!(l.allow(&"b", t0), "another pod has its own bucket");
        assert!(!l.allow(&"a", t0 + REFILL / 2));
        assert!(l.allow(&"a", t0 + REFILL + REFILL / 2));
        assert!(!l.allow(&"a", t0 + REFILL + REFILL / 2));
        l.prune(t0 + REFILL * (BURST + 2));
        assert!(l.buckets.is_empty(), "full buckets are forgotten");
    }
}

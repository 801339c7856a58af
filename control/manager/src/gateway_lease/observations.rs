//! What the controllers remember of the gateway Lease between reads: the last spec seen and
//! our time when it was first seen so, shared by the watch and the ForeignCluster controller.

use std::sync::{Arc, Mutex};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    jiff::Timestamp,
};

/// When we last saw the gateway Lease renewed, on OUR clock (as client-go's leader election
/// records `observedTime`): its `renewTime` is the holder's clock, which may be skewed. Fed by
/// the watch ([`returns`]) and by each read ([`read`]).
#[derive(Debug, Default)]
pub struct Observations {
    /// The last spec seen and our time when it was first seen so.
    last: Option<(LeaseSpec, Timestamp)>,
}

/// Shared by the watch and the ForeignCluster controller.
pub type SharedObservations = Arc<Mutex<Observations>>;

impl Observations {
    /// Records the Lease as seen at `now` (`None`: there is none); returns our time when its
    /// spec was last seen to change: `now` if it just did. On first sight the Lease's own
    /// `renewTime` if that is earlier (a Lease of a dead operator stays stale across our
    /// restarts; a live holder whose clock is behind renews within seconds, and that change
    /// counts at our time).
    pub fn see(&mut self, lease: Option<&Lease>, now: Timestamp) -> Option<Timestamp> {
        let Some(lease) = lease else {
            self.last = None;
            return None;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let at = match &self.last {
            Some((seen, at)) if *seen == spec => return Some(*at),
            Some(_) => now,
            None => spec.renew_time.as_ref().map_or(now, |t| t.0.min(now)),
        };
        self.last = Some((spec, at));
        Some(at)
    }

    /// Our time when the last spec seen was first seen.
    pub fn observed(&self) -> Option<Timestamp> {
        self.last.as_ref().map(|(_, at)| *at)
    }
}

pub(super) fn lock(seen: &Mutex<Observations>) -> std::sync::MutexGuard<'_, Observations> {
    // A panic while holding the lock leaves a consistent value (whole replacements only).
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

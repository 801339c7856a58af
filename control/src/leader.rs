//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics: the
//! controller-manager's replicas (`--leader-elect`) all serve the webhooks, and only the holder
//! of the Lease [`crate::consts::objects::MANAGER_LEADER_LEASE`] reconciles and runs the virtual
//! kubelets.
//!
//! - A Lease held by another is judged on OUR clock, never by its `renewTime` (written with the
//!   holder's clock, which may be skewed): it is fresh for `leaseDurationSeconds` after we last
//!   saw its record change ([`Seen`]); a record that stops changing for that long is expired
//!   and taken over.
//! - Every write replaces the Lease read, with its `resourceVersion` as the precondition, so of
//!   two replicas taking an expired Lease at once one wins and the other gets a conflict.
//! - A leader that has not renewed for `renew_deadline` has lost ([`lost`]): it stops leading
//!   (the process exits and is restarted as a follower) before the others may take over at
//!   `lease_duration`.
//! - A leader that stops cleanly releases the Lease ([`released`]): the next one takes it at its
//!   next try instead of waiting for the expiry.
//!
//! Pure: the reads and writes are `liqo_lease`'s (the controller-manager's and the gateway
//! operators' elector); times are inputs.

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};

/// The election's durations (client-go's names; defaults 10 s, 7 s, 2 s, shorter than
/// client-go's 15 s, 10 s, 2 s so that a follower takes over within about 12 s of a leader's
/// crash: the Lease expires 10 s after the follower last saw it renewed, at most one retry
/// period after the renewal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long followers wait, after they last saw the Lease renewed, before taking it.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// How often each replica tries to take or renew the Lease.
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(7),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Durations that cannot elect safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// A leader could still believe it leads after the others took over.
    #[error(
        "the lease duration ({lease:?}) must be longer than the renew deadline ({renew:?}): a leader could still lead when another takes over"
    )]
    DeadlineNotShorter {
        /// `lease_duration`.
        lease: Duration,
        /// `renew_deadline`.
        renew: Duration,
    },
    /// The leader would not retry before its deadline (client-go's 1.2 jitter factor).
    #[error(
        "the renew deadline ({renew:?}) must be longer than 1.2 × the retry period ({retry:?}): the leader would not retry before it gives up"
    )]
    RetryTooLong {
        /// `renew_deadline`.
        renew: Duration,
        /// `retry_period`.
        retry: Duration,
    },
    /// A Lease counts whole seconds.
    #[error("the lease duration ({0:?}) must be at least 1 s (a Lease counts whole seconds)")]
    TooShort(Duration),
}

impl Timing {
    /// Checked durations.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Timing, TimingError> {
        if lease_duration < Duration::from_secs(1) {
            return Err(TimingError::TooShort(lease_duration));
        }
        if lease_duration <= renew_deadline {
            return Err(TimingError::DeadlineNotShorter {
                lease: lease_duration,
                renew: renew_deadline,
            });
        }
        if retry_period.is_zero() || renew_deadline <= retry_period.mul_f64(1.2) {
            return Err(TimingError::RetryTooLong {
                renew: renew_deadline,
                retry: retry_period,
            });
        }
        Ok(Timing {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }

    /// `leaseDurationSeconds`: the duration in whole seconds, rounded up.
    pub fn lease_secs(&self) -> i32 {
        let secs =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }
}

/// The part of a Lease the election reads: a change of any of it is a renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `spec.holderIdentity` (`None` when empty: released).
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration_secs: Option<i32>,
    /// `spec.renewTime`.
    pub renewed: Option<Timestamp>,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

impl Record {
    /// The record of `lease`.
    pub fn of(lease: &Lease) -> Record {
        let spec = lease.spec.as_ref();
        Record {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            duration_secs: spec.and_then(|s| s.lease_duration_seconds),
            renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
        }
    }
}

/// What a replica remembers of the Lease between tries: the record last read and when (our
/// clock) it was first seen so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The record.
    pub record: Record,
    /// When we first read it.
    pub at: Instant,
}

/// What to do at a try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease: create it, held by us.
    Create,
    /// Replace the Lease read (its `resourceVersion` the precondition), held by us: renewed when
    /// we held it, taken (`taken`: acquired now, one more transition) when another or nobody did.
    Write {
        /// Another or nobody held it.
        taken: bool,
    },
    /// Another holds it and it is fresh: we follow, and try again after the retry period.
    Follow {
        /// Its holder.
        holder: String,
        /// How long it stays fresh unless renewed (on our clock).
        expires_in: Duration,
    },
}

/// The step for replica `me` given the Lease read (`None`: absent) and what it saw before, and
/// what it remembers now.
pub fn decide(
    me: &str,
    lease: Option<&Lease>,
    seen: Option<&Seen>,
    now: Instant,
) -> (Step, Option<Seen>) {
    let Some(lease) = lease else {
        return (Step::Create, None);
    };
    let record = Record::of(lease);
    let seen = match seen {
        Some(s) if s.record == record => s.clone(),
        _ => Seen { record, at: now },
    };
    let step = match &seen.record.holder {
        Some(h) if h == me => Step::Write { taken: false },
        None => Step::Write { taken: true },
        Some(holder) => {
            let secs = seen.record.duration_secs.unwrap_or(0).max(0);
            let fresh_until = seen.at + Duration::from_secs(secs.unsigned_abs().into());
            match fresh_until
                .checked_duration_since(now)
                .filter(|d| !d.is_zero())
            {
                Some(expires_in) => Step::Follow {
                    holder: holder.clone(),
                    expires_in,
                },
                None => Step::Write { taken: true },
            }
        }
    };
    (step, Some(seen))
}

/// The Lease to write for `step` (not [`Step::Follow`]): `read` (absent for [`Step::Create`])
/// held by `me`, renewed at `wall` (our wall clock, for people and other tools: the election
/// itself never compares it).
pub fn written(
    read: Option<&Lease>,
    name: &str,
    namespace: &str,
    me: &str,
    taken: bool,
    timing: &Timing,
    wall: Timestamp,
) -> Lease {
    let mut lease = read.cloned().unwrap_or_else(|| Lease {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        spec: None,
    });
    lease.metadata.managed_fields = None;
    let old = read.map(Record::of);
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let first = read.is_none();
    spec.holder_identity = Some(me.to_owned());
    spec.lease_duration_seconds = Some(timing.lease_secs());
    spec.renew_time = Some(MicroTime(wall));
    if first || taken {
        spec.acquire_time = Some(MicroTime(wall));
    }
    spec.lease_transitions = Some(match old {
        // client-go counts a change of holder, from nobody too.
        Some(old) if taken => old.transitions.saturating_add(1),
        Some(old) => old.transitions,
        None => 0,
    });
    lease
}

/// The Lease released by `me` at `wall`, when `me` holds it (no holder, a 1 s duration: the
/// others take it at their next try); `None` when another holds it (nothing to give back).
pub fn released(read: &Lease, me: &str, wall: Timestamp) -> Option<Lease> {
    if Record::of(read).holder.as_deref() != Some(me) {
        return None;
    }
    let mut lease = read.clone();
    lease.metadata.managed_fields = None;
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(wall));
    Some(lease)
}

/// Whether a leader whose last successful renewal was at `renewed` has lost its lead at `now`
/// (it could not renew within the deadline: the others may take over soon).
pub fn lost(renewed: Instant, now: Instant, timing: &Timing) -> bool {
    now.saturating_duration_since(renewed) >= timing.renew_deadline
}

/// When a leader tries to renew next after a renewal that failed at `now` (its last successful
/// one sent at `renewed`): one retry period later (a slow API server is not sent renewals back
/// to back), or `None` when the lead is lost: now, or before that try could start (stepping
/// down at once beats a try that could not count).
pub fn retry_after_failure(renewed: Instant, now: Instant, timing: &Timing) -> Option<Instant> {
    let next = now + timing.retry_period;
    (!lost(renewed, now, timing) && next < renewed + timing.renew_deadline).then_some(next)
}

#[cfg(test)]
mod tests;

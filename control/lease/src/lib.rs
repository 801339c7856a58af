//! Leader election's reads and writes (`--leader-elect` of the controller-manager, the gateway
//! operators' active/standby): reads and writes a `coordination.k8s.io/v1` Lease for the steps
//! of [`control::leader`] (which decides; see its semantics there). [`Elector::acquire`] returns
//! once this replica leads, [`Elector::keep`] renews until the lead is lost (and says why), and
//! [`Elector::release`] gives the Lease back on a clean stop.
//!
//! It never decides whether a Lease is fresh itself and never reconciles anything (the caller
//! runs its controllers only while it leads); the `leading` gauge it is given says whether this
//! replica leads.

use std::time::Instant;

use control::leader::{self, Seen, Step, Timing};
use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::{Api, Client, api::PostParams};
use prometheus_client::metrics::gauge::Gauge;

/// Why the lead was lost (the process stops leading: it exits and is restarted as a follower).
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Another replica holds the Lease now.
    #[error("the Lease {lease} is held by {holder} now")]
    TakenBy {
        /// `namespace/name`.
        lease: String,
        /// Its holder.
        holder: String,
    },
    /// No renewal succeeded within the renew deadline; the last failure is the source.
    #[error("the Lease {lease} could not be renewed for {deadline:?}")]
    Deadline {
        /// `namespace/name`.
        lease: String,
        /// The renew deadline.
        deadline: std::time::Duration,
        /// The last failure.
        #[source]
        source: kube::Error,
    },
    /// A renewal still had no answer at the renew deadline (a stalled API server or
    /// connection): the others may take over soon, so this replica stops leading first.
    #[error("the Lease {lease}: no answer to a renewal within the renew deadline ({deadline:?})")]
    Stalled {
        /// `namespace/name`.
        lease: String,
        /// The renew deadline.
        deadline: std::time::Duration,
    },
}

/// One replica's side of the election.
pub struct Elector {
    api: Api<Lease>,
    field_manager: String,
    namespace: String,
    name: String,
    me: String,
    timing: Timing,
    seen: Option<Seen>,
    leading: Gauge,
    /// When the last successful write was sent (before it: the others count from when they
    /// saw it, later).
    renewed: Option<Instant>,
}

/// The outcome of one try.
enum Try {
    /// Written: we lead, since the write was sent (the others count from when they saw it).
    Leading(Instant),
    Following(String),
}

impl Elector {
    /// An elector for replica `me` on the Lease `name` in `namespace`, writing as
    /// `field_manager`; `leading` is set to 1 while it leads.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        me: String,
        timing: Timing,
        leading: Gauge,
        field_manager: &str,
    ) -> Elector {
        Elector {
            api: Api::namespaced(client, namespace),
            field_manager: field_manager.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            me,
            timing,
            seen: None,
            leading,
            renewed: None,
        }
    }

    /// This replica's identity in the Lease.
    pub fn identity(&self) -> &str {
        &self.me
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// One read and, when the step says so, one write (a conflict: someone else wrote first,
    /// so we follow until the next try).
    async fn try_once(&mut self) -> Result<Try, kube::Error> {
        let read = self.api.get_opt(&self.name).await?;
        let (step, seen) =
            leader::decide(&self.me, read.as_ref(), self.seen.as_ref(), Instant::now());
        self.seen = seen;
        let taken = match step {
            Step::Follow { holder, .. } => return Ok(Try::Following(holder)),
            Step::Create => false,
            Step::Write { taken } => taken,
        };
        let lease = leader::written(
            read.as_ref(),
            &self.name,
            &self.namespace,
            &self.me,
            taken,
            &self.timing,
            Timestamp::now(),
        );
        let pp = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        let sent = Instant::now();
        let wrote = match read {
            None => self.api.create(&pp, &lease).await,
            Some(_) => self.api.replace(&self.name, &pp, &lease).await,
        };
        match wrote {
            Ok(_) => Ok(Try::Leading(sent)),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                Ok(Try::Following("a replica that wrote it first (409)".into()))
            }
            Err(e) => Err(e),
        }
    }

    /// Tries every retry period until this replica leads (an API error is logged and tried
    /// again: a follower has nothing to lose).
    pub async fn acquire(&mut self) {
        let mut last: Option<String> = None;
        loop {
            // A try without an answer within the deadline is given up (and made again).
            let tried = tokio::time::timeout(self.timing.renew_deadline, self.try_once()).await;
            let now = match tried {
                Err(_elapsed) => "the Lease: no answer within the renew deadline".to_owned(),
                Ok(Ok(Try::Leading(sent))) => {
                    self.renewed = Some(sent);
                    self.leading.set(1);
                    tracing::info!(lease = %self.lease(), identity = %self.me, "leading");
                    return;
                }
                Ok(Ok(Try::Following(holder))) => format!("following {holder}"),
                Ok(Err(e)) => format!("the Lease: {}", liqo_types::chain(&e)),
            };
            if last.as_ref() != Some(&now) {
                if now.starts_with("the Lease") {
                    tracing::warn!(lease = %self.lease(), identity = %self.me, "not leading: {now}");
                } else {
                    tracing::info!(lease = %self.lease(), identity = %self.me, "not leading: {now}");
                }
                last = Some(now);
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// Renews every retry period while this replica leads; returns why it stopped leading
    /// (another took the Lease, or no renewal succeeded within the renew deadline).
    pub async fn keep(&mut self) -> LeaderError {
        let mut renewed = self.renewed.unwrap_or_else(Instant::now);
        // The first renewal one retry period after the write that won the Lease, not after
        // whatever the leader did since: work between `acquire` and `keep` (the gateway marks
        // its pod) must not eat its time. The next ones one retry period after each try ends
        // (a slow API server is not sent renewals back to back).
        let mut next = renewed + self.timing.retry_period;
        loop {
            tokio::time::sleep_until(next.into()).await;
            let start = Instant::now();
            // No try outlives the deadline: a stalled call must not keep a replica leading
            // while another takes the Lease.
            let left = (renewed + self.timing.renew_deadline).saturating_duration_since(start);
            let Ok(tried) = tokio::time::timeout(left, self.try_once()).await else {
                self.leading.set(0);
                return LeaderError::Stalled {
                    lease: self.lease(),
                    deadline: self.timing.renew_deadline,
                };
            };
            let failure = match tried {
                Ok(Try::Leading(sent)) => {
                    renewed = sent;
                    self.renewed = Some(sent);
                    next = Instant::now() + self.timing.retry_period;
                    continue;
                }
                Ok(Try::Following(holder)) => {
                    self.leading.set(0);
                    return LeaderError::TakenBy {
                        lease: self.lease(),
                        holder,
                    };
                }
                Err(e) => e,
            };
            tracing::warn!(lease = %self.lease(), error = %liqo_types::chain(&failure), "renewing the Lease");
            // Lost now, or before the next try could start: the failure is why.
            let Some(at) = leader::retry_after_failure(renewed, Instant::now(), &self.timing)
            else {
                self.leading.set(0);
                return LeaderError::Deadline {
                    lease: self.lease(),
                    deadline: self.timing.renew_deadline,
                    source: failure,
                };
            };
            next = at;
        }
    }

    /// Gives the Lease back (a clean stop): the next replica takes it at its next try. A
    /// failure is logged: the Lease then expires on its own.
    pub async fn release(&mut self) {
        self.leading.set(0);
        let read = match self.api.get_opt(&self.name).await {
            Ok(Some(l)) => l,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(lease = %self.lease(), error = %liqo_types::chain(&e), "reading the Lease to release it: it expires on its own");
                return;
            }
        };
        let Some(free) = leader::released(&read, &self.me, Timestamp::now()) else {
            return;
        };
        let pp = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        match self.api.replace(&self.name, &pp, &free).await {
            Ok(_) => tracing::info!(lease = %self.lease(), "released the Lease"),
            Err(e) => {
                tracing::warn!(lease = %self.lease(), error = %liqo_types::chain(&e), "releasing the Lease: it expires on its own");
            }
        }
    }
}

/// A replica identity unique among the replicas: `<pod or host name>_<8 random hex digits>`
/// (client-go's is host name and a UUID; the pod name alone repeats when its container
/// restarts while the old process may still hold the Lease).
pub fn identity(base: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(format!("{base}_{:08x}", u32::from_be_bytes(bytes)))
}

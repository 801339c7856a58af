//! The reload loop's driver: waits on the config source, the supervised tasks and the shutdown
//! signal, asks the [`Core`] what to do, calls the [`Daemon`], and publishes the
//! [`ReloadStatus`]. All decisions are the core's.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use liqo_types::field::FieldError;
use tokio::sync::watch;

use crate::{
    core::{Core, Decision, Trigger},
    signal::Signal,
    source::ConfigFile,
    status::ReloadStatus,
    tasks::{BoxError, RunError, Tasks},
};

/// Why a daemon did not apply a config.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The config cannot be applied while running (for example a changed listen port): refused
    /// with its field, not retried until the file changes. Nothing was changed.
    #[error("refused")]
    Refused(#[source] FieldError),
    /// Applying failed (the kernel refused a request): retried on the next tick, and shown
    /// until an apply succeeds. The daemon rolled back, or its next apply converges from
    /// whatever state this one left.
    #[error("applying failed")]
    Failed(#[source] BoxError),
}

impl ApplyError {
    /// A failure from any error.
    pub fn failed(e: impl Into<BoxError>) -> ApplyError {
        ApplyError::Failed(e.into())
    }
}

/// A change failed, and putting the previous state back failed too: the state may be a mix of
/// both until an apply succeeds. Its text is the change's error and its causes, then the
/// rollback's as the source, so `/status` shows both.
#[derive(Debug, thiserror::Error)]
#[error("{}; rolling back failed too", chain(change.as_ref()))]
pub struct RollbackFailed {
    /// Why the change failed.
    pub change: BoxError,
    /// Why putting the previous state back failed.
    #[source]
    pub rollback: BoxError,
}

impl RollbackFailed {
    /// `change`'s error alone if the rollback went well, both otherwise.
    pub fn join<E: Into<BoxError>, R: Into<BoxError>>(
        change: E,
        rollback: Result<(), R>,
    ) -> BoxError {
        match rollback {
            Ok(()) => change.into(),
            Err(r) => Box::new(RollbackFailed {
                change: change.into(),
                rollback: r.into(),
            }),
        }
    }
}

/// A daemon driven by the reload loop. It owns its config format and what applying means (the
/// kernel for the gateway and the overlay, in-memory state for a gRPC service).
pub trait Daemon {
    /// Its validated config.
    type Config;

    /// Parses and validates a file's text; every error names its field.
    fn parse(&self, text: &str) -> Result<Self::Config, FieldError>;

    /// Applies `cfg`, which [`parse`](Self::parse) accepted: converges to it from whatever state
    /// there is. It is called with the running config again on every resync and after a failed
    /// apply, so converging to the config in force must be cheap and must restore anything
    /// changed behind the daemon's back. On `Err` the running state must be the previous
    /// config's (rolled back) or one the next apply converges from; a failed rollback belongs
    /// in the error ([`RollbackFailed`]), not only in the log.
    fn apply(&mut self, cfg: Self::Config) -> impl Future<Output = Result<(), ApplyError>> + Send;

    /// Checked on every tick and change; an error stops the daemon (its supervisor restarts it).
    fn health(&self) -> Result<(), BoxError> {
        Ok(())
    }
}

/// The reload loop of a running daemon: the [`Core`] and the published status.
pub struct Reload {
    core: Core,
    tx: watch::Sender<ReloadStatus>,
}

/// A live view of a daemon's [`ReloadStatus`], for its `/status` and `/metrics`.
pub type StatusView = watch::Receiver<ReloadStatus>;

impl Reload {
    /// A daemon that started with `text`, read from `source`.
    pub fn started(source: &ConfigFile, text: String) -> Reload {
        let core = Core::started(source.path().display().to_string(), text);
        let (tx, _) = watch::channel(core.status().clone());
        Reload { core, tx }
    }

    /// The status as it changes (clone freely).
    pub fn view(&self) -> StatusView {
        self.tx.subscribe()
    }

    /// The running text.
    pub fn running(&self) -> &str {
        self.core.running()
    }

    /// Reloads `daemon` from `source` until `shutdown` resolves (`Ok` with the signal), a task
    /// of `tasks` stops, or the daemon reports itself unhealthy (the error). The caller tears
    /// its daemon down afterwards in every case; `tasks` are aborted when this returns.
    pub async fn run<D: Daemon>(
        mut self,
        daemon: &mut D,
        mut source: ConfigFile,
        mut tasks: Tasks,
        shutdown: impl Future<Output = Signal>,
    ) -> Result<Signal, RunError> {
        tokio::pin!(shutdown);
        loop {
            let trigger = tokio::select! {
                biased;
                sig = &mut shutdown => return Ok(sig),
                e = tasks.stopped() => return Err(e),
                trigger = source.next() => trigger,
            };
            daemon.health().map_err(RunError::Unhealthy)?;
            self.step(daemon, &source, trigger).await;
        }
    }

    /// One look at the file.
    async fn step<D: Daemon>(&mut self, daemon: &mut D, source: &ConfigFile, trigger: Trigger) {
        let read = source.read();
        if let Err(e) = &read
            && self.core.status().read_error != Some(chain(e))
        {
            tracing::error!(error = %chain(e), "cannot read the configuration; the running state is kept");
        }
        let Decision::Try(text) = self.core.observe(read, trigger) else {
            self.publish();
            return;
        };
        // The running text again: a resync, or a repair after a failure.
        let again = text == self.core.running();
        let digest = crate::digest(&text);
        match daemon.parse(&text) {
            Err(e) => self.refuse(text, &e),
            Ok(cfg) => match timed(daemon.apply(cfg)).await {
                (Ok(()), took) if again && !self.core.dirty() => {
                    let micros = took.as_micros();
                    tracing::debug!(%digest, micros, "running configuration converged again");
                    self.core.applied(text, took);
                }
                (Ok(()), took) => {
                    let micros = took.as_micros();
                    tracing::info!(%digest, again, micros, "configuration applied");
                    self.core.applied(text, took);
                }
                (Err(ApplyError::Refused(e)), _) => self.refuse(text, &e),
                (Err(ApplyError::Failed(e)), _) => {
                    let line = chain(e.as_ref());
                    tracing::warn!(%digest, again, error = %line, "applying the configuration failed; retrying on the next tick");
                    self.core.failed(text, line);
                }
            },
        }
        self.publish();
    }

    fn refuse(&mut self, text: String, e: &FieldError) {
        tracing::error!(digest = %crate::digest(&text), field = %e.field, problem = %e.problem, "configuration refused; the running state is kept");
        self.core.refused(text, &e.field, &e.problem);
    }

    fn publish(&self) {
        self.tx.send_if_modified(|s| {
            let changed = s != self.core.status();
            if changed {
                s.clone_from(self.core.status());
            }
            changed
        });
    }
}

/// `f`'s output and how long it took.
async fn timed<T>(f: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

pub use liqo_types::chain;

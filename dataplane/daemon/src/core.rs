//! The reload loop's decisions, with no I/O: given what the config file holds now, whether to
//! try a text; given how trying it went, what the status says.
//!
//! Refuse-and-keep semantics:
//! - a text that fails to parse or validate, or that the daemon refuses to apply for a config
//!   reason, is *refused*: the running state is kept and the text is not tried again until the
//!   file changes;
//! - a text whose apply *failed* (the kernel said no) is recorded and tried again on every tick;
//! - a failed apply makes the core *dirty*: the daemon rolled back, or tried to, and may have
//!   left a state that is neither the old config nor the new one. Until an apply succeeds, the
//!   failure stays in the status and every tick converges again: the file's text if it is the
//!   failed one, otherwise the running text (the file back at it, refused, or unreadable);
//! - an applied text becomes the running one and clears the failure (and the dirt);
//! - a file back at the running text clears its refusal; it clears a failure only by applying
//!   the running text again when dirty;
//! - every resync (about every ten seconds) converges the running text again, so that state
//!   changed behind the daemon's back (a route deleted by hand, a link flap) comes back; a
//!   failure is shown and retried like any other;
//! - an unreadable file sets the read error, which clears once it is readable again.
//!
//! `refused` describes the file's latest text; `apply_error` the latest failed apply (of the
//! file's text, or of the running one when repairing or resyncing), set exactly while dirty.

use std::{error::Error, time::Duration};

use liqo_types::chain;

use crate::status::{Applied, Failed, Refused, ReloadStatus, digest};

/// Why the file is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Something changed in its directory.
    Changed,
    /// The periodic tick (failed applies are retried on it).
    Tick,
    /// The periodic resync: like a tick, and the running text is converged again even when
    /// nothing failed.
    Resync,
}

/// What to do with the file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do.
    Keep,
    /// Parse this text and apply it, then report with [`Core::refused`], [`Core::failed`] or
    /// [`Core::applied`]. It may be the running text (a repair or a resync).
    Try(String),
}

/// The decision core of the reload loop.
#[derive(Debug, Clone)]
pub struct Core {
    status: ReloadStatus,
    running: String,
    /// The file's text, refused.
    refused: Option<String>,
    /// The text whose apply failed last; `Some` exactly while dirty.
    failed: Option<String>,
}

impl Core {
    /// A daemon that started with `text` from `source` (it counts as the first apply).
    pub fn started(source: impl Into<String>, text: String) -> Core {
        Core {
            status: ReloadStatus {
                source: source.into(),
                applied: Some(Applied {
                    digest: digest(&text),
                    count: 1,
                    micros: 0,
                }),
                ..ReloadStatus::default()
            },
            running: text,
            refused: None,
            failed: None,
        }
    }

    /// The status to publish.
    pub fn status(&self) -> &ReloadStatus {
        &self.status
    }

    /// The running text.
    pub fn running(&self) -> &str {
        &self.running
    }

    /// Whether a failed apply may have left a state other than the running text's (until an
    /// apply succeeds).
    pub fn dirty(&self) -> bool {
        self.failed.is_some()
    }

    /// The file read as `read` (its text, or why it cannot be read: shown with its causes) on
    /// `trigger`.
    pub fn observe<E: Error + 'static>(
        &mut self,
        read: Result<String, E>,
        trigger: Trigger,
    ) -> Decision {
        let text = match read {
            Ok(text) => {
                self.status.read_error = None;
                Some(text)
            }
            Err(e) => {
                self.status.read_error = Some(chain(&e));
                None
            }
        };
        match text {
            Some(t) if t == self.running => {
                (self.refused, self.status.refused) = (None, None);
            }
            Some(t) if self.refused.as_ref() == Some(&t) => {}
            // Retried on the ticks, not on every event in the directory.
            Some(t) if self.failed.as_ref() == Some(&t) => {
                return match trigger {
                    Trigger::Changed => Decision::Keep,
                    Trigger::Tick | Trigger::Resync => Decision::Try(t),
                };
            }
            Some(t) => return Decision::Try(t),
            None => {}
        }
        // Nothing new to try: converge the running text if a failed apply may have left
        // something else (a failed repair of it waits for a tick), or on the resync.
        let repair = match (&self.failed, trigger) {
            (None, _) => false,
            (Some(f), Trigger::Changed) => *f != self.running,
            (Some(_), Trigger::Tick | Trigger::Resync) => true,
        };
        if repair || trigger == Trigger::Resync {
            Decision::Try(self.running.clone())
        } else {
            Decision::Keep
        }
    }

    /// `text` was refused: `field` and `problem` say why. The running text refused (when
    /// converged again) is a failure: the file's text is not to blame.
    pub fn refused(&mut self, text: String, field: &str, problem: &str) {
        if text == self.running {
            self.failed(text, format!("refused: {field}: {problem}"));
            return;
        }
        self.status.refused = Some(Refused {
            digest: digest(&text),
            field: field.to_owned(),
            problem: problem.to_owned(),
        });
        self.refused = Some(text);
    }

    /// Applying `text` failed with `error` (one line).
    pub fn failed(&mut self, text: String, error: String) {
        if text != self.running {
            // It is the file's text now: not the refused one.
            (self.refused, self.status.refused) = (None, None);
        }
        let attempts = match (&self.failed, &self.status.apply_error) {
            (Some(t), Some(f)) if *t == text => f.attempts + 1,
            _ => 1,
        };
        self.status.apply_error = Some(Failed {
            digest: digest(&text),
            error,
            attempts,
        });
        self.failed = Some(text);
    }

    /// `text` was applied, in `took`, and runs now (the running text again: nothing counted,
    /// and the time of the apply that made it run is kept).
    pub fn applied(&mut self, text: String, took: Duration) {
        (self.failed, self.status.apply_error) = (None, None);
        if text == self.running {
            return;
        }
        (self.refused, self.status.refused) = (None, None);
        let count = self.status.applied.as_ref().map_or(0, |a| a.count) + 1;
        self.status.applied = Some(Applied {
            digest: digest(&text),
            count,
            micros: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        });
        self.running = text;
    }
}

#[cfg(test)]
mod tests;

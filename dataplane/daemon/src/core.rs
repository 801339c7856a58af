//! The reload loop's decisions, with no I/O: given what the config file holds now, whether to
//! try it; given how trying it went, what the status says.
//!
//! Refuse-and-keep semantics:
//! - a text that fails to parse or validate, or that the daemon refuses to apply for a config
//!   reason, is *refused*: the running state is kept and the text is not tried again until the
//!   file changes;
//! - a text whose apply *failed* (the kernel said no) is recorded and tried again on every tick
//!   (the daemon's apply converges from any state or rolls back);
//! - an applied text becomes the running one and clears every error;
//! - a file back at the running text clears every refusal and failure;
//! - an unreadable file sets the read error, which clears once it is readable again.
//!
//! At most one of `refused` and `apply_error` is set: both describe the file's latest text.

use crate::status::{Applied, Failed, Refused, ReloadStatus, digest};

/// Why the file is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Something changed in its directory.
    Changed,
    /// The periodic tick (failed applies are retried on it).
    Tick,
}

/// What to do with the file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do.
    Keep,
    /// Parse this text and apply it, then report with [`Core::refused`], [`Core::failed`] or
    /// [`Core::applied`].
    Try(String),
}

/// The decision core of the reload loop.
#[derive(Debug, Clone)]
pub struct Core {
    status: ReloadStatus,
    running: String,
    refused: Option<String>,
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

    /// The file read as `read` (its text, or why it cannot be read) on `trigger`.
    pub fn observe(&mut self, read: Result<String, String>, trigger: Trigger) -> Decision {
        let text = match read {
            Ok(text) => text,
            Err(e) => {
                self.status.read_error = Some(e);
                return Decision::Keep;
            }
        };
        self.status.read_error = None;
        if text == self.running {
            self.clear();
            return Decision::Keep;
        }
        if self.refused.as_ref() == Some(&text) {
            return Decision::Keep;
        }
        if self.failed.as_ref() == Some(&text) && trigger == Trigger::Changed {
            return Decision::Keep;
        }
        Decision::Try(text)
    }

    /// `text` was refused: `field` and `problem` say why.
    pub fn refused(&mut self, text: String, field: &str, problem: &str) {
        self.status.apply_error = None;
        self.failed = None;
        self.status.refused = Some(Refused {
            digest: digest(&text),
            field: field.to_owned(),
            problem: problem.to_owned(),
        });
        self.refused = Some(text);
    }

    /// Applying `text` failed with `error` (one line).
    pub fn failed(&mut self, text: String, error: String) {
        self.status.refused = None;
        self.refused = None;
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

    /// `text` was applied and runs now.
    pub fn applied(&mut self, text: String) {
        self.clear();
        self.status.read_error = None;
        let count = self.status.applied.as_ref().map_or(0, |a| a.count) + 1;
        self.status.applied = Some(Applied {
            digest: digest(&text),
            count,
        });
        self.running = text;
    }

    fn clear(&mut self) {
        (self.status.refused, self.status.apply_error) = (None, None);
        (self.refused, self.failed) = (None, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use Trigger::{Changed, Tick};

    fn core() -> Core {
        Core::started("/etc/d.yaml", "a".into())
    }

    fn ok(t: &str) -> Result<String, String> {
        Ok(t.to_owned())
    }

    fn try_(t: &str) -> Decision {
        Decision::Try(t.to_owned())
    }

    #[test]
    fn start_counts_as_the_first_apply() {
        let c = core();
        let s = c.status();
        assert_eq!(s.source, "/etc/d.yaml");
        assert_eq!(
            s.applied,
            Some(Applied {
                digest: digest("a"),
                count: 1
            })
        );
        assert_eq!(
            (&s.refused, &s.apply_error, &s.read_error),
            (&None, &None, &None)
        );
        assert_eq!(c.running(), "a");
    }

    #[test]
    fn the_running_text_is_not_applied_again() {
        let mut c = core();
        assert_eq!(c.observe(ok("a"), Changed), Decision::Keep);
        assert_eq!(c.observe(ok("a"), Tick), Decision::Keep);
        assert_eq!(c.status().applied.as_ref().unwrap().count, 1);
    }

    #[test]
    fn a_new_text_is_tried_and_once_applied_runs() {
        let mut c = core();
        assert_eq!(c.observe(ok("b"), Changed), try_("b"));
        c.applied("b".into());
        assert_eq!(c.running(), "b");
        let a = c.status().applied.clone().unwrap();
        assert_eq!((a.digest, a.count), (digest("b"), 2));
        assert_eq!(c.observe(ok("b"), Tick), Decision::Keep);
        // Back to an older text: a change like any other.
        assert_eq!(c.observe(ok("a"), Changed), try_("a"));
    }

    #[test]
    fn a_refused_text_is_kept_out_until_the_file_changes() {
        let mut c = core();
        assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
        c.refused("bad".into(), "peers[0].id", "is empty");
        let r = c.status().refused.clone().unwrap();
        assert_eq!(
            (r.digest.as_str(), r.field.as_str(), r.problem.as_str()),
            (digest("bad").as_str(), "peers[0].id", "is empty")
        );
        assert_eq!(c.running(), "a", "the running state is kept");
        assert_eq!(c.observe(ok("bad"), Tick), Decision::Keep, "not retried");
        assert_eq!(c.observe(ok("bad"), Changed), Decision::Keep);
        assert!(c.status().refused.is_some(), "still refused");
        // Another text: tried; a second refusal replaces the first.
        assert_eq!(c.observe(ok("worse"), Changed), try_("worse"));
        c.refused("worse".into(), "mtu", "too small");
        assert_eq!(c.status().refused.as_ref().unwrap().field, "mtu");
        // Refused again after the file changed back to a refused text: tried again.
        assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
    }

    #[test]
    fn back_to_the_running_text_clears_a_refusal() {
        let mut c = core();
        c.observe(ok("bad"), Changed);
        c.refused("bad".into(), "f", "p");
        assert_eq!(c.observe(ok("a"), Changed), Decision::Keep);
        assert_eq!(c.status().refused, None);
        assert_eq!(c.status().problem(), None);
        assert_eq!(
            c.status().applied.as_ref().unwrap().count,
            1,
            "nothing re-applied"
        );
        // And the once-refused text is tried again if it comes back.
        assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
    }

    #[test]
    fn a_failed_apply_is_retried_on_ticks_and_counted() {
        let mut c = core();
        assert_eq!(c.observe(ok("b"), Changed), try_("b"));
        c.failed("b".into(), "RTNETLINK: network unreachable".into());
        let f = c.status().apply_error.clone().unwrap();
        assert_eq!((f.digest, f.attempts), (digest("b"), 1));
        assert_eq!(c.running(), "a");
        assert_eq!(
            c.observe(ok("b"), Changed),
            Decision::Keep,
            "not on every event"
        );
        assert_eq!(c.observe(ok("b"), Tick), try_("b"), "retried on the tick");
        c.failed("b".into(), "again".into());
        let f = c.status().apply_error.clone().unwrap();
        assert_eq!((f.error.as_str(), f.attempts), ("again", 2));
        assert_eq!(c.observe(ok("b"), Tick), try_("b"));
        c.applied("b".into());
        assert_eq!(c.status().apply_error, None, "success clears the failure");
        assert_eq!(c.status().applied.as_ref().unwrap().count, 2);
        assert_eq!(c.observe(ok("b"), Tick), Decision::Keep);
    }

    #[test]
    fn a_failure_of_another_text_starts_counting_again() {
        let mut c = core();
        c.observe(ok("b"), Changed);
        c.failed("b".into(), "x".into());
        c.observe(ok("b"), Tick);
        c.failed("b".into(), "x".into());
        assert_eq!(c.observe(ok("c"), Changed), try_("c"));
        c.failed("c".into(), "y".into());
        let f = c.status().apply_error.clone().unwrap();
        assert_eq!((f.digest, f.attempts), (digest("c"), 1));
    }

    #[test]
    fn back_to_the_running_text_clears_a_failure() {
        let mut c = core();
        c.observe(ok("b"), Changed);
        c.failed("b".into(), "x".into());
        assert_eq!(c.observe(ok("a"), Tick), Decision::Keep);
        assert_eq!(c.status().apply_error, None);
        assert_eq!(
            c.observe(ok("a"), Tick),
            Decision::Keep,
            "nothing left to retry"
        );
    }

    #[test]
    fn refusal_and_failure_replace_each_other() {
        let mut c = core();
        c.observe(ok("b"), Changed);
        c.failed("b".into(), "x".into());
        assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
        c.refused("bad".into(), "f", "p");
        assert!(c.status().refused.is_some());
        assert_eq!(
            c.status().apply_error,
            None,
            "the failure was of an older text"
        );
        assert_eq!(c.observe(ok("b"), Changed), try_("b"));
        c.failed("b".into(), "x".into());
        assert_eq!(c.status().refused, None);
        assert_eq!(c.status().apply_error.as_ref().unwrap().attempts, 1);
        // A refused text is not retried on the tick, a failed one is: the latest decides.
        assert_eq!(c.observe(ok("b"), Tick), try_("b"));
    }

    #[test]
    fn an_apply_refused_by_the_daemon_counts_as_refused() {
        let mut c = core();
        c.observe(ok("port"), Changed);
        c.refused(
            "port".into(),
            "listenPort",
            "cannot change from 1 to 2 while running",
        );
        assert_eq!(c.observe(ok("port"), Tick), Decision::Keep);
        assert_eq!(c.status().refused.as_ref().unwrap().field, "listenPort");
    }

    #[test]
    fn an_unreadable_file_is_reported_until_it_is_readable() {
        let mut c = core();
        assert_eq!(c.observe(Err("no such file".into()), Tick), Decision::Keep);
        assert_eq!(c.status().read_error.as_deref(), Some("no such file"));
        assert!(c.status().problem().unwrap().contains("no such file"));
        assert_eq!(c.running(), "a", "the running state is kept");
        assert_eq!(
            c.observe(Err("is a directory".into()), Changed),
            Decision::Keep
        );
        assert_eq!(c.status().read_error.as_deref(), Some("is a directory"));
        assert_eq!(c.observe(ok("a"), Changed), Decision::Keep);
        assert_eq!(c.status().read_error, None);
        assert_eq!(c.status().problem(), None);
        // Readable again with a new text: cleared, and the text is tried.
        c.observe(Err("gone".into()), Tick);
        assert_eq!(c.observe(ok("b"), Changed), try_("b"));
        assert_eq!(c.status().read_error, None);
    }

    #[test]
    fn an_unreadable_file_keeps_the_refusal_and_stops_retries() {
        let mut c = core();
        c.observe(ok("bad"), Changed);
        c.refused("bad".into(), "f", "p");
        c.observe(Err("gone".into()), Tick);
        let s = c.status();
        assert!(s.refused.is_some() && s.read_error.is_some());
        let p = s.problem().unwrap();
        assert!(p.contains("gone") && p.contains("f: p"), "{p}");
        // A failed text is not retried while the file cannot be read.
        let mut c = core();
        c.observe(ok("b"), Changed);
        c.failed("b".into(), "x".into());
        assert_eq!(c.observe(Err("gone".into()), Tick), Decision::Keep);
        assert_eq!(c.observe(ok("b"), Tick), try_("b"), "retried once readable");
    }
}

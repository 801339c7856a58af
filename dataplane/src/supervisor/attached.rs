//! A process started as our child ([`super::Spec::attached`]): its exit, a wait with a
//! timeout, SIGTERM then SIGKILL, and the end of its logs.

use std::{
    path::PathBuf,
    process::{Child, ExitStatus},
    thread,
    time::{Duration, Instant},
};

use nix::{sys::signal::Signal, unistd::Pid};

use super::{
    error::Error,
    pid::{POLL, send, tail},
};

/// How an [`Attached`] child ended when stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit status.
    pub status: ExitStatus,
    /// Whether it took SIGKILL (it did not exit within the grace period after SIGTERM).
    pub killed: bool,
    /// How long after the first signal it was gone (zero if it had exited before).
    pub after: Duration,
}

/// A process we started as our child; dropping it stops it (see [`super::Spec::attached`]).
#[derive(Debug)]
pub struct Attached {
    /// What it is, for messages.
    pub label: String,
    child: Child,
    /// Its logs (more may be added: a daemon's trace file).
    pub logs: Vec<PathBuf>,
    drop_grace: Duration,
}

impl Attached {
    pub(super) fn new(label: String, child: Child, log: PathBuf, drop_grace: Duration) -> Attached {
        Attached {
            label,
            child,
            logs: vec![log],
            drop_grace,
        }
    }

    /// Its pid (the program's own: `taskset` execs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_error(&self, source: std::io::Error) -> Error {
        Error::Wait {
            name: self.label.clone(),
            pid: self.pid(),
            source,
        }
    }

    /// How it exited, if it has (reaping it).
    pub fn exited(&mut self) -> Result<Option<ExitStatus>, Error> {
        self.child.try_wait().map_err(|e| self.wait_error(e))
    }

    /// Waits up to `timeout` for it to exit by itself; `None` if it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<ExitStatus>, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(POLL);
        }
    }

    /// The last `n` non-empty lines of each of its logs.
    pub fn tail(&self, n: usize) -> String {
        let all: Vec<String> = self
            .logs
            .iter()
            .map(|l| tail(l, n))
            .filter(|t| !t.is_empty())
            .collect();
        if all.is_empty() {
            "(no output)".into()
        } else {
            all.join("\n    ")
        }
    }

    /// The last lines of its logs.
    pub fn log_tail(&self) -> String {
        self.tail(8)
    }

    /// SIGKILL now (unless it has exited) and reap it.
    pub fn kill(&mut self) -> Result<ExitStatus, Error> {
        // Kills only a child not yet reaped (a zombie takes the signal harmlessly).
        self.child.kill().map_err(|e| self.wait_error(e))?;
        self.child.wait().map_err(|e| self.wait_error(e))
    }

    /// SIGTERM, then SIGKILL after `grace` (straight away for a zero grace); how it ended.
    pub fn stop(&mut self, grace: Duration) -> Result<Exit, Error> {
        if let Some(status) = self.exited()? {
            return Ok(Exit {
                status,
                killed: false,
                after: Duration::ZERO,
            });
        }
        let sent = Instant::now();
        if !grace.is_zero() {
            if let Ok(raw) = i32::try_from(self.pid()) {
                send(Pid::from_raw(raw), Signal::SIGTERM);
            }
            if let Some(status) = self.wait_exit(grace)? {
                return Ok(Exit {
                    status,
                    killed: false,
                    after: sent.elapsed(),
                });
            }
        }
        let status = self.kill()?;
        Ok(Exit {
            status,
            killed: true,
            after: sent.elapsed(),
        })
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Err(e) = self.stop(self.drop_grace) {
            tracing::error!(label = %self.label, error = %e, "stopping on drop");
        }
    }
}

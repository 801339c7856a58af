//! The one process supervisor of the project: it starts, watches and stops processes,
//! optionally inside a network namespace; it never decides what to run.
//!
//! A [`Spec`] names a program, its arguments and environment and its log (stdout and stderr
//! both), optionally a namespace to run it in and a CPU to pin it to through `taskset` (which
//! execs it, so the pid stays the program's). It starts either detached (own process group,
//! outliving us, recorded by pid as a [`Proc`]: the lab and the Kubernetes harness) or attached
//! (an [`Attached`] child we own and stop on drop: the bench and every crate's tests). For
//! either: whether it is alive (reaping our own children), whether a pid still runs the program
//! we started (pids are reused), stopping it with SIGTERM and SIGKILL after a grace period, and
//! the end of its log.

use std::{
    ffi::OsString,
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use nix::{
    sys::{
        signal::{self, Signal},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};
use serde::{Deserialize, Serialize};

use crate::Netns;

mod attached;
#[cfg(test)]
mod tests;

pub use attached::{Attached, Exit};

/// How often waits look again.
const POLL: Duration = Duration::from_millis(20);

/// What went wrong with a process.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its log could not be opened.
    #[error("opening the log {}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// It could not be started.
    #[error("starting {name} ({})", program.display())]
    Spawn {
        /// Its name.
        name: String,
        /// The program.
        program: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for our child (or signalling it) failed.
    #[error("waiting for {name} (pid {pid})")]
    Wait {
        /// Its name.
        name: String,
        /// Its pid.
        pid: u32,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A process to start.
#[derive(Debug, Clone)]
pub struct Spec {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, Option<OsString>)>,
    netns: Option<Netns>,
    pin: Option<(PathBuf, u32)>,
    log: PathBuf,
    truncate: bool,
    drop_grace: Duration,
}

impl Spec {
    /// `program` (a path, or a name looked up in `PATH`), called `name` (its file name, for
    /// [`is_ours`]), with stdout and stderr appended to `log`.
    pub fn new(
        name: impl Into<String>,
        program: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Spec {
        Spec {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            envs: Vec::new(),
            netns: None,
            pin: None,
            log: log.into(),
            truncate: false,
            drop_grace: Duration::from_secs(3),
        }
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Spec {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds an environment variable.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Spec {
        self.envs.push((key.into(), Some(value.into())));
        self
    }

    /// Removes an environment variable it would inherit.
    #[must_use]
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Spec {
        self.envs.push((key.into(), None));
        self
    }

    /// Runs it inside `ns`.
    #[must_use]
    pub fn netns(mut self, ns: &Netns) -> Spec {
        self.netns = Some(ns.clone());
        self
    }

    /// Pins the whole process to `cpu` with `taskset` (which execs it: same pid).
    #[must_use]
    pub fn pin(mut self, taskset: &Path, cpu: u32) -> Spec {
        self.pin = Some((taskset.to_owned(), cpu));
        self
    }

    /// Starts the log afresh instead of appending.
    #[must_use]
    pub fn truncate_log(mut self) -> Spec {
        self.truncate = true;
        self
    }

    /// Attached only: SIGKILL it when the handle is dropped, without the SIGTERM and the grace
    /// period (for tests whose teardown removes what it leaves anyway).
    #[must_use]
    pub fn kill_on_drop(mut self) -> Spec {
        self.drop_grace = Duration::ZERO;
        self
    }

    fn command(&self) -> Result<Command, Error> {
        let log_error = |source| Error::Log {
            path: self.log.clone(),
            source,
        };
        let out = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(!self.truncate)
            .truncate(self.truncate)
            .open(&self.log)
            .map_err(log_error)?;
        let err = out.try_clone().map_err(log_error)?;
        let first = match &self.pin {
            Some((taskset, _)) => taskset.as_path(),
            None => self.program.as_path(),
        };
        let mut cmd = match &self.netns {
            Some(ns) => ns.command(first),
            None => Command::new(first),
        };
        if let Some((_, cpu)) = &self.pin {
            cmd.arg("-c").arg(cpu.to_string()).arg(&self.program);
        }
        cmd.args(&self.args);
        for (key, value) in &self.envs {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        Ok(cmd)
    }

    fn spawn(&self, cmd: &mut Command) -> Result<Child, Error> {
        cmd.spawn().map_err(|source| Error::Spawn {
            name: self.name.clone(),
            program: self.program.clone(),
            source,
        })
    }

    /// Starts it detached: its own process group, so it outlives us and a terminal's signals;
    /// returns its record.
    pub fn detached(&self) -> Result<Proc, Error> {
        let mut cmd = self.command()?;
        cmd.process_group(0);
        let child = self.spawn(&mut cmd)?;
        Ok(Proc {
            name: self.name.clone(),
            pid: child.id(),
            log: self.log.display().to_string(),
        })
    }

    /// Starts it as our child, stopped when the handle is dropped (SIGTERM, then SIGKILL after
    /// 3 s; see [`Spec::kill_on_drop`]).
    pub fn attached(&self) -> Result<Attached, Error> {
        let mut cmd = self.command()?;
        let child = self.spawn(&mut cmd)?;
        Ok(Attached::new(
            self.name.clone(),
            child,
            self.log.clone(),
            self.drop_grace,
        ))
    }
}

/// A started process, as recorded (the Kubernetes harness keeps these in its state file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    /// What it is (`etcd`, `liqo-gateway`, ...): its program's file name.
    pub name: String,
    /// Its pid.
    pub pid: u32,
    /// Its log.
    pub log: String,
}

/// Whether `pid` is still running: reaped now if it is our child; otherwise its `/proc` entry
/// exists and is no zombie (whoever adopted it may reap it late; its work is done).
pub fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    match waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => true,
        Ok(_) => false,
        Err(_) => fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            // The state follows the command name in parentheses.
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X']))
        }),
    }
}

/// Whether `pid` runs a program whose file name is `name` (so the pid was not reused).
pub fn is_ours(pid: u32, name: &str) -> bool {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    Path::new(&*String::from_utf8_lossy(first))
        .file_name()
        .is_some_and(|f| f == name)
}

/// How [`stop`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// It was not running (or the pid is another program's now).
    NotRunning,
    /// It exited after SIGTERM.
    Exited,
    /// It needed SIGKILL, and is gone.
    Killed,
    /// It survived SIGKILL for the grace period (stuck in the kernel?).
    Stuck,
}

fn wait_gone(pid: u32, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL);
    }
    true
}

/// Sends `sig` to `pid`. A process that exited meanwhile (ESRCH) is what stopping wants, and
/// the caller's wait sees it; any other failure is logged (the wait then reports the process
/// still running).
pub(crate) fn send(pid: Pid, sig: Signal) {
    match signal::kill(pid, sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::warn!(%pid, signal = %sig, error = %e, "signalling a process"),
    }
}

/// Stops `p` if it still runs its program: SIGTERM, then SIGKILL after `grace`.
pub fn stop(p: &Proc, grace: Duration) -> Stopped {
    if !alive(p.pid) || !is_ours(p.pid, &p.name) {
        return Stopped::NotRunning;
    }
    let Ok(raw) = i32::try_from(p.pid) else {
        return Stopped::NotRunning;
    };
    let pid = Pid::from_raw(raw);
    send(pid, Signal::SIGTERM);
    if wait_gone(p.pid, grace) {
        return Stopped::Exited;
    }
    send(pid, Signal::SIGKILL);
    if wait_gone(p.pid, grace) {
        Stopped::Killed
    } else {
        tracing::error!(pid = p.pid, name = %p.name, "still alive after SIGKILL (stuck in the kernel?)");
        Stopped::Stuck
    }
}

/// The last `n` non-empty lines of `log`, one per line after the first, indented.
pub fn tail(log: &Path, n: usize) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n    ")
}

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
    time::Duration,
};

use crate::Netns;

mod attached;
mod error;
mod pid;
#[cfg(test)]
mod tests;

pub use attached::{Attached, Exit};
pub use error::Error;
pub use pid::{Proc, Stopped, alive, is_ours, stop, tail};

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

//! The one process supervisor of the lab, the Kubernetes harness and the bench: start a
//! program (optionally inside a network namespace, optionally pinned to a CPU through
//! `taskset`, which execs it so the pid stays the program's), either detached (own process
//! group, outliving us, recorded by pid) or attached (a child we own and stop on drop); tell
//! whether a pid is alive (reaping our own children) and still the program we started (pids
//! are reused); stop it with SIGTERM, then SIGKILL after a grace period; show the end of its
//! log.

use std::{
    ffi::OsString,
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    thread,
    time::{Duration, Instant},
};

use dataplane::Netns;
use nix::{
    sys::{
        signal::{self, Signal},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};
use serde::{Deserialize, Serialize};

/// Why a process could not be started.
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
}

/// A process to start.
#[derive(Debug, Clone)]
pub struct Spec {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    netns: Option<Netns>,
    pin: Option<(PathBuf, u32)>,
    log: PathBuf,
    truncate: bool,
}

impl Spec {
    /// `program`, called `name` (its file name, for [`is_ours`]), with stdout and stderr
    /// appended to `log`.
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
        self.envs.push((key.into(), value.into()));
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

    fn command(&self) -> Result<Command, Error> {
        let out = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(!self.truncate)
            .truncate(self.truncate)
            .open(&self.log)
            .map_err(|source| Error::Log {
                path: self.log.clone(),
                source,
            })?;
        let err = out.try_clone().map_err(|source| Error::Log {
            path: self.log.clone(),
            source,
        })?;
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
        cmd.args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
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

    /// Starts it as our child, stopped when the handle is dropped.
    pub fn attached(&self) -> Result<Attached, Error> {
        let mut cmd = self.command()?;
        let child = self.spawn(&mut cmd)?;
        Ok(Attached {
            label: self.name.clone(),
            child,
            logs: vec![self.log.clone()],
        })
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
        thread::sleep(Duration::from_millis(20));
    }
    true
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
    // An error means it exited meanwhile, which the wait below sees.
    let _ = signal::kill(pid, Signal::SIGTERM);
    if wait_gone(p.pid, grace) {
        return Stopped::Exited;
    }
    // As above: gone meanwhile is fine.
    let _ = signal::kill(pid, Signal::SIGKILL);
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

/// A process we started as our child; dropping it stops it (3 s grace).
#[derive(Debug)]
pub struct Attached {
    /// What it is, for messages.
    pub label: String,
    child: Child,
    /// Its logs (more may be added: a daemon's trace file).
    pub logs: Vec<PathBuf>,
}

impl Attached {
    /// Its pid (the program's own: `taskset` execs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How it exited, if it has.
    pub fn exited(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// The last lines of its logs.
    pub fn log_tail(&self) -> String {
        let all: Vec<String> = self
            .logs
            .iter()
            .map(|l| tail(l, 8))
            .filter(|t| !t.is_empty())
            .collect();
        if all.is_empty() {
            "(no output)".into()
        } else {
            all.join("\n    ")
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; whether it exited by itself.
    pub fn stop(&mut self, grace: Duration) -> bool {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return true;
        }
        if let Ok(raw) = i32::try_from(self.child.id()) {
            // An error means it exited meanwhile, which try_wait below sees.
            let _ = signal::kill(Pid::from_raw(raw), Signal::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        // It exited between the last look and now, or it dies now: either way it is gone.
        let _ = self.child.kill();
        if let Err(e) = self.child.wait() {
            tracing::error!(label = %self.label, error = %e, "reaping after SIGKILL");
        }
        false
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("liqo-supervisor-{}-{name}.log", std::process::id()))
    }

    #[test]
    fn a_detached_process_is_ours_until_stopped_and_its_log_is_tailed() {
        let l = log("detached");
        let p = Spec::new("sh", "/bin/sh", &l)
            .args(["-c", "echo one; echo; echo two; exec sleep 30"])
            .truncate_log()
            .detached()
            .unwrap();
        assert!(alive(p.pid));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !tail(&l, 5).contains("two") && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(tail(&l, 5), "one\n    two");
        // After the exec the program is `sleep`: a pid running another program is not ours.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !is_ours(p.pid, "sleep") && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!is_ours(p.pid, "sh"));
        let p = Proc {
            name: "sleep".into(),
            ..p
        };
        assert_eq!(stop(&p, Duration::from_secs(5)), Stopped::Exited);
        assert!(!alive(p.pid));
        assert_eq!(stop(&p, Duration::from_secs(1)), Stopped::NotRunning);
        fs::remove_file(&l).unwrap();
    }

    #[test]
    fn sigkill_after_the_grace_period() {
        let l = log("stubborn");
        let p = Spec::new("sh", "/bin/sh", &l)
            .args([
                "-c",
                "trap '' TERM; echo ready; while :; do sleep 0.05; done",
            ])
            .detached()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !tail(&l, 1).contains("ready") && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(stop(&p, Duration::from_millis(300)), Stopped::Killed);
        fs::remove_file(&l).unwrap();
    }

    #[test]
    fn an_attached_child_reports_its_exit_and_an_unknown_program_fails() {
        let l = log("attached");
        let mut c = Spec::new("sh", "/bin/sh", &l)
            .args(["-c", "echo \"$GREETING\"; exit 3"])
            .env("GREETING", "hello")
            .attached()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(s) = c.exited().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "did not exit");
            thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(3));
        assert_eq!(c.log_tail(), "hello");
        assert!(c.stop(Duration::from_millis(100)));
        let e = Spec::new("nope", "/nonexistent/nope", &l)
            .attached()
            .unwrap_err();
        assert!(e.to_string().contains("starting nope"), "{e}");
        drop(c);
        fs::remove_file(&l).unwrap();
        let e = Spec::new("sh", "/bin/sh", "/nonexistent/dir/x.log")
            .detached()
            .unwrap_err();
        assert!(matches!(e, Error::Log { .. }), "{e}");
    }
}

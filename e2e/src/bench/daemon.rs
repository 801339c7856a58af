//! A daemon running in a gateway namespace, spawned straight into it (setns between fork and
//! exec) so that the child's pid is the daemon's: its `/proc/<pid>/stat` holds the CPU time of
//! all its threads, and killing it kills the daemon. Pinning wraps it in `taskset`, which execs
//! it (same pid, whole process pinned, every later thread included).

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use dataplane::Netns;
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};

use super::BenchError;

fn fail(what: impl Into<String>, detail: impl Into<String>) -> BenchError {
    BenchError::Step {
        what: what.into(),
        detail: detail.into(),
    }
}

/// A daemon running in a gateway namespace.
pub(crate) struct Daemon {
    pub(crate) label: String,
    child: Child,
    pub(crate) logs: Vec<PathBuf>,
}

impl Daemon {
    /// Starts `program args` in `ns`, pinned to `cpu` (the whole process) if given.
    pub(crate) fn spawn(
        label: String,
        ns: &Netns,
        taskset: Option<(&Path, u32)>,
        program: &Path,
        args: &[String],
        envs: &[(&str, &str)],
        log: PathBuf,
    ) -> Result<Daemon, BenchError> {
        let out = fs::File::create(&log)
            .map_err(|e| fail(format!("creating {}", log.display()), e.to_string()))?;
        let err = out
            .try_clone()
            .map_err(|e| fail(format!("opening {}", log.display()), e.to_string()))?;
        let mut cmd = match taskset {
            Some((taskset, cpu)) => {
                let mut c = ns.command(taskset);
                c.arg("-c").arg(cpu.to_string()).arg(program);
                c
            }
            None => ns.command(program),
        };
        cmd.args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("starting {label}"), e.to_string()))?;
        Ok(Daemon {
            label,
            child,
            logs: vec![log],
        })
    }

    /// Its pid (the daemon's own: `taskset` execs it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if it has exited, with the end of its logs.
    pub(crate) fn check_alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(fail(
                format!("{} exited ({status})", self.label),
                self.log_tail(),
            )),
            Err(e) => Err(fail(format!("waiting for {}", self.label), e.to_string())),
        }
    }

    /// The last lines of its logs, one per line after the first, indented.
    pub(crate) fn log_tail(&self) -> String {
        let mut out = Vec::new();
        for log in &self.logs {
            let text = fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            out.extend(
                lines[lines.len().saturating_sub(8)..]
                    .iter()
                    .map(|l| l.to_string()),
            );
        }
        if out.is_empty() {
            "(no output)".into()
        } else {
            out.join("\n    ")
        }
    }

    /// SIGTERM, then SIGKILL after `grace`. Returns whether it exited by itself.
    pub(crate) fn stop(&mut self, grace: Duration) -> bool {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return true;
        }
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

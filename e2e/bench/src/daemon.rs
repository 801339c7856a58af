//! A daemon running in a gateway namespace, spawned straight into it through the
//! [`dataplane::supervisor`] (setns between fork and exec) so that the child's pid is the
//! daemon's: its `/proc/<pid>/stat` holds the CPU time of all its threads, and killing it kills
//! the daemon. Pinning wraps it in `taskset`, which execs it (same pid, whole process pinned,
//! every later thread included).

use std::path::{Path, PathBuf};

use dataplane::{
    Netns,
    supervisor::{Attached, Spec},
};

use super::{BenchError, options::fail};

/// A daemon running in a gateway namespace (stopped on drop).
pub(crate) type Daemon = Attached;

/// Starts `program args` in `ns` as `label`, pinned to `cpu` (the whole process) if given,
/// with a fresh `log`.
pub(crate) fn spawn(
    label: String,
    ns: &Netns,
    taskset: Option<(&Path, u32)>,
    program: &Path,
    args: &[String],
    envs: &[(&str, &str)],
    log: PathBuf,
) -> Result<Daemon, BenchError> {
    let mut spec = Spec::new(label.clone(), program, log)
        .args(args)
        .netns(ns)
        .truncate_log();
    if let Some((taskset, cpu)) = taskset {
        spec = spec.pin(taskset, cpu);
    }
    for (k, v) in envs {
        spec = spec.env(k, v);
    }
    spec.attached()
        .map_err(|e| BenchError::step(format!("starting {label}"), &e))
}

/// An error if `d` has exited, with the end of its logs.
pub(crate) fn check_alive(d: &mut Daemon) -> Result<(), BenchError> {
    match d.exited() {
        Ok(None) => Ok(()),
        Ok(Some(status)) => Err(fail(format!("{} exited ({status})", d.label), d.log_tail())),
        Err(e) => Err(BenchError::step(format!("waiting for {}", d.label), &e)),
    }
}

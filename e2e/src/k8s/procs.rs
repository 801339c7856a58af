//! The processes of a cluster: started detached (own process group, output to a log file),
//! recorded by pid, stopped with SIGTERM in order and SIGKILL after a grace period.

use std::{
    fs,
    net::TcpListener,
    os::unix::process::CommandExt,
    path::Path,
    process::{Command, Stdio},
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

use super::K8sError;

/// A started process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    /// What it is (`etcd`, `kube-apiserver`, ...).
    pub name: String,
    /// Its pid.
    pub pid: u32,
    /// Its log.
    pub log: String,
}

/// A free TCP port on 127.0.0.1 (the kernel's pick; released before use).
pub(crate) fn free_port() -> Result<u16, K8sError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| K8sError::Spawn {
        what: "finding a free port".into(),
        source: e,
    })?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| K8sError::Spawn {
            what: "finding a free port".into(),
            source: e,
        })
}

/// Starts `program args`, detached, with stdout and stderr appended to `log`.
pub(crate) fn spawn(
    name: &str,
    program: &Path,
    args: &[String],
    log: &Path,
) -> Result<Proc, K8sError> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| K8sError::io(log, e))?;
    let err = out.try_clone().map_err(|e| K8sError::io(log, e))?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| K8sError::Spawn {
            what: format!("{name} ({})", program.display()),
            source: e,
        })?;
    Ok(Proc {
        name: name.into(),
        pid: child.id(),
        log: log.display().to_string(),
    })
}

/// The last `n` lines of a log.
pub(crate) fn tail(log: &str, n: usize) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether `pid` is still running (reaping it if it is our child).
pub(crate) fn alive(pid: u32) -> bool {
    let p = Pid::from_raw(pid as i32);
    match waitpid(p, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => true,
        Ok(_) => false,
        Err(_) => fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X']))
        }),
    }
}

/// Whether `p` is the process we started (the pid was not reused).
fn ours(p: &Proc) -> bool {
    let cmdline = fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap_or_default();
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(first).ends_with(&p.name)
}

/// Stops `procs` one after the other (SIGTERM, then SIGKILL after `grace`); returns how many
/// needed SIGKILL.
pub(crate) fn stop(procs: &[Proc], grace: Duration) -> usize {
    let mut killed = 0;
    for p in procs {
        if !alive(p.pid) || !ours(p) {
            continue;
        }
        let pid = Pid::from_raw(p.pid as i32);
        let _ = signal::kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while alive(p.pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        if alive(p.pid) {
            let _ = signal::kill(pid, Signal::SIGKILL);
            killed += 1;
            let deadline = Instant::now() + grace;
            while alive(p.pid) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            if alive(p.pid) {
                tracing::error!(pid = p.pid, name = %p.name, "still alive after SIGKILL (stuck in the kernel?)");
            }
        }
    }
    killed
}

/// The programs a cluster runs.
pub(crate) const COMPONENTS: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];

/// Every running component (one of [`COMPONENTS`]) whose command line mentions `dir` (each component gets a path under
/// its cluster's directory), named after its program.
pub(crate) fn using(dir: &Path) -> Vec<Proc> {
    let needle = dir.display().to_string();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args
            .iter()
            .skip(1)
            .any(|a| a.contains(&format!("{needle}/")))
            || !alive(pid)
        {
            continue;
        }
        let name = Path::new(args.first().map_or("", String::as_str))
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Only the components themselves: never a `kubectl --kubeconfig <dir>/...` or a
        // `tail -f <dir>/logs/...` someone runs alongside.
        if !COMPONENTS.contains(&name.as_str()) {
            continue;
        }
        out.push(Proc {
            name,
            pid,
            log: String::new(),
        });
    }
    out
}

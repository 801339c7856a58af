//! A process by its pid, ours or not: whether it is alive and still runs the program we
//! started, stopping it (SIGTERM, then SIGKILL after a grace period), and the end of its log.

use std::{
    fs,
    path::Path,
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

/// How often waits look again.
pub(super) const POLL: Duration = Duration::from_millis(20);

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

/// The last `n` non-empty lines of `log`, one per line after the first, indented; a Rust
/// backtrace's frames are left out, so a program that ended with a panic or an error shows
/// its message rather than the bottom of its stack.
pub fn tail(log: &Path, n: usize) -> String {
    tail_of(&fs::read_to_string(log).unwrap_or_default(), n)
}

/// [`tail`] of a log's text.
pub(crate) fn tail_of(text: &str, n: usize) -> String {
    let mut in_backtrace = false;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            if t.eq_ignore_ascii_case("stack backtrace:") {
                in_backtrace = true;
                return false;
            }
            // A backtrace is its header's indented lines (frames, their `at file:line`) and
            // its closing note; anything else ends it (anyhow's numbered causes are kept).
            if in_backtrace {
                let indented = t.len() < l.len();
                if indented || t.starts_with("note: Some details are omitted") {
                    return false;
                }
                in_backtrace = false;
            }
            !t.is_empty()
        })
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n    ")
}

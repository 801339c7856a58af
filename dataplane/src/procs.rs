//! The processes running on this host, as `/proc` shows them: one scan, read-only. The lab,
//! the test kit, the benches and the tests find their processes here (by program, flag,
//! environment, parent or network namespace) instead of each walking `/proc` itself.
//!
//! It never signals or waits for a process (that is [`crate::supervisor`]'s), and a process
//! that exits while it looks is simply not in the answer.

use std::{
    ffi::{OsStr, OsString},
    fs, io,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::Path,
};

/// One process: its PID and command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its PID.
    pub pid: u32,
    /// Its command line, program first (empty for a kernel thread).
    pub args: Vec<String>,
}

impl Process {
    /// The process `pid` now, or `None` if it is gone, a zombie, or unreadable.
    pub fn read(pid: u32) -> Option<Process> {
        let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        // Empty arguments are kept: `--flag ""` must not pair the flag with the next one.
        let args = split_nul(&raw);
        let p = Process { pid, args };
        p.running().then_some(p)
    }

    /// The file name of its program (`kube-apiserver` for `/x/bin/kube-apiserver`).
    pub fn program(&self) -> &str {
        self.args
            .first()
            .and_then(|a| Path::new(a).file_name())
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    }

    /// Whether its arguments (after the program) give `flag` the value `value`, as
    /// `--flag value` or `--flag=value`.
    pub fn has_flag(&self, flag: &str, value: &str) -> bool {
        let args = self.args.get(1..).unwrap_or_default();
        let joined = format!("{flag}={value}");
        args.contains(&joined) || args.windows(2).any(|w| w[0] == flag && w[1] == value)
    }

    /// Whether any argument after the program contains `needle`.
    pub fn mentions(&self, needle: &str) -> bool {
        self.args.iter().skip(1).any(|a| a.contains(needle))
    }

    /// Its environment (`NAME=value`), empty when it cannot be read (another user's, or gone).
    pub fn environ(&self) -> Vec<String> {
        self.read_environ().unwrap_or_default()
    }

    /// Its environment (`NAME=value`), or why it cannot be read: for a caller that must tell
    /// an empty environment from an unreadable one (to start the process again the same way).
    pub fn read_environ(&self) -> io::Result<Vec<String>> {
        fs::read(format!("/proc/{}/environ", self.pid)).map(|raw| split_nul(&raw))
    }

    /// Its command line and environment byte for byte (the fields above are lossy UTF-8), read
    /// again now: to start the same program the same way. An error if either cannot be read
    /// (another user's, or gone).
    pub fn read_exact(&self) -> io::Result<(Vec<OsString>, Vec<OsString>)> {
        let args = fs::read(format!("/proc/{}/cmdline", self.pid))?;
        let env = fs::read(format!("/proc/{}/environ", self.pid))?;
        Ok((split_nul_os(&args), split_nul_os(&env)))
    }

    /// The value of its environment variable `name`.
    pub fn env(&self, name: &str) -> Option<String> {
        let key = format!("{name}=");
        self.environ()
            .into_iter()
            .find_map(|v| v.strip_prefix(&key).map(str::to_owned))
    }

    /// Its parent's PID.
    pub fn parent(&self) -> Option<u32> {
        stat_field(
            &fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?,
            1,
        )?
        .parse()
        .ok()
    }

    /// Whether it still runs: its `/proc` entry exists and it is neither a zombie nor dead.
    pub fn running(&self) -> bool {
        fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .ok()
            .and_then(|s| stat_field(&s, 0).map(|state| !matches!(state, "Z" | "X")))
            .unwrap_or(false)
    }

    /// The (device, inode) of its network namespace, what two processes share when they are
    /// in the same one.
    pub fn netns(&self) -> Option<(u64, u64)> {
        netns_of(self.pid)
    }
}

/// The PIDs in `/proc` now (processes, not threads).
pub fn pids() -> io::Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc")?.flatten() {
        if let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(pid);
        }
    }
    Ok(out)
}

/// The (device, inode) of process `pid`'s network namespace, `None` if it is gone.
pub fn netns_of(pid: u32) -> Option<(u64, u64)> {
    let m = fs::metadata(format!("/proc/{pid}/ns/net")).ok()?;
    Some((m.dev(), m.ino()))
}

/// Every running process now (see [`Process::read`]).
pub fn all() -> io::Result<Vec<Process>> {
    Ok(pids()?.into_iter().filter_map(Process::read).collect())
}

/// Every running process for which `keep` holds.
pub fn find(keep: impl Fn(&Process) -> bool) -> io::Result<Vec<Process>> {
    Ok(all()?.into_iter().filter(|p| keep(p)).collect())
}

/// NUL-terminated strings (as `/proc` writes them), empty ones included.
fn split_nul(raw: &[u8]) -> Vec<String> {
    split_nul_os(raw)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// [`split_nul`] byte for byte: for what must be given back to a program unchanged.
fn split_nul_os(raw: &[u8]) -> Vec<OsString> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|b| *b == 0)
        .map(|a| OsStr::from_bytes(a).to_os_string())
        .collect()
}

/// Field `n` of `/proc/<pid>/stat` after the command name (0: the state, 1: the parent PID).
/// The name is in parentheses and may itself hold spaces and parentheses.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_of(args: &[&str]) -> Process {
        Process {
            pid: 1,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    #[test]
    fn flags_match_in_both_spellings_and_never_the_program() {
        let p = proc_of(&["/x/liqo-virtual-kubelet", "--foreign-cluster-name", "milan"]);
        assert_eq!(p.program(), "liqo-virtual-kubelet");
        assert!(p.has_flag("--foreign-cluster-name", "milan"));
        assert!(!p.has_flag("--foreign-cluster-name", "mil"));
        let p = proc_of(&["/x/vk", "--foreign-cluster-name=milan"]);
        assert!(p.has_flag("--foreign-cluster-name", "milan"));
        let p = proc_of(&["--foreign-cluster-name", "milan"]);
        assert!(
            !p.has_flag("--foreign-cluster-name", "milan"),
            "the program is no flag"
        );
        assert!(!proc_of(&[]).has_flag("--a", "b"));
        assert!(proc_of(&["/x/etcd", "--data-dir=/run/a/rome"]).mentions("/run/a/"));
        assert!(!proc_of(&["/run/a/etcd"]).mentions("/run/a/"));
    }

    #[test]
    fn empty_arguments_keep_their_place() {
        assert_eq!(
            split_nul(b"/x/vk\0--a\0\0--b\0x\0"),
            ["/x/vk", "--a", "", "--b", "x"]
        );
        assert!(split_nul(b"").is_empty());
        let p = Process {
            pid: 1,
            args: split_nul(b"/x/vk\0--foreign-cluster-name\0\0--home-cluster-name\0milan\0"),
        };
        assert!(!p.has_flag("--foreign-cluster-name", "--home-cluster-name"));
        assert!(p.has_flag("--foreign-cluster-name", ""));
    }

    #[test]
    fn exact_splitting_keeps_bytes_that_are_not_utf8() {
        let raw = b"/x/vk\0--a=\xff\xfe\0\0";
        let exact = split_nul_os(raw);
        assert_eq!(exact.len(), 3);
        assert_eq!(exact[1].as_bytes(), b"--a=\xff\xfe");
        assert_eq!(exact[2].as_bytes(), b"");
        // The lossy view replaces them, which is why restarting uses the exact one.
        assert_eq!(split_nul(raw)[1], "--a=\u{fffd}\u{fffd}");
    }

    #[test]
    fn stat_fields_come_after_the_name_whatever_it_holds() {
        let stat = "42 (a) b (c)) S 7 42 42 0 -1";
        assert_eq!(stat_field(stat, 0), Some("S"));
        assert_eq!(stat_field(stat, 1), Some("7"));
        assert_eq!(stat_field("garbage", 0), None);
    }

    #[test]
    fn this_process_is_found_with_its_parent_environment_and_namespace() {
        let me = std::process::id();
        let p = Process::read(me).expect("our own process");
        assert!(p.running());
        assert_eq!(p.parent(), Some(std::os::unix::process::parent_id()));
        assert_eq!(p.env("PATH"), std::env::var("PATH").ok());
        assert!(p.netns().is_some());
        assert!(pids().unwrap().contains(&me));
        let found = find(|q| q.pid == me).unwrap();
        assert_eq!(found, vec![p]);
        assert!(Process::read(u32::MAX).is_none());
    }
}

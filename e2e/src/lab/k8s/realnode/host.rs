//! What a real node holds on the host besides its processes: its cgroup (the same path in every
//! cgroup v1 hierarchy, below the memory cgroup of the session that brought the lab up, so
//! everything it runs stays inside it) and its mounts (the kubelet's shared root directory,
//! the volumes it mounts there, the containers' root file systems and network namespaces).
//! Parsing is pure; the few system calls are at the bottom.

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

/// Where the cgroup v1 hierarchies are mounted.
const CGROUP_FS: &str = "/sys/fs/cgroup";

/// A failed host operation, naming its path.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}", path.display())]
pub struct HostError {
    /// What was done.
    pub what: &'static str,
    /// On what.
    pub path: PathBuf,
    /// Why it failed.
    #[source]
    pub source: std::io::Error,
}

fn err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> HostError + 'a {
    move |source| HostError {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The memory cgroup of a process, from its `/proc/<pid>/cgroup` text (`4:memory:/a/b`).
pub(super) fn memory_cgroup(proc_cgroup: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        ctrl.split(',')
            .any(|c| c == "memory")
            .then(|| path.to_owned())
    })
}

/// The cgroup path of a node: below `session` (the memory cgroup of whoever brings the lab up).
pub(super) fn node_cgroup(session: &str, prefix: &str, cluster: &str, node: &str) -> String {
    format!(
        "{}/liqo-lab-{prefix}/{cluster}-{node}",
        session.trim_end_matches('/')
    )
}

/// The mount points under any of `dirs` in a `/proc/self/mountinfo` text, deepest first (the
/// order to unmount them in). Octal escapes (`\040` for a space) are decoded.
pub(super) fn mounts_under(mountinfo: &str, dirs: &[&Path]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .filter(|m| dirs.iter().any(|d| m.starts_with(d)))
        .collect();
    // Stacked mounts on one path stay: each needs its own unmount.
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup hierarchies of this host (each mounted directory of [`CGROUP_FS`]); the unified
/// one of a hybrid host only with `unified` (the kubelet and runc make their cgroups there
/// too, so teardown looks there; nothing is put there by the lab).
fn hierarchies(unified: bool) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(CGROUP_FS) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            (unified || p.file_name().is_some_and(|n| n != "unified"))
                && p.join("cgroup.procs").is_file()
        })
        .collect();
    out.sort();
    out
}

/// Whether this host runs cgroup v1 with a memory controller (the kubelet's cgroupfs driver and
/// this module's per-hierarchy paths assume it); why not otherwise.
pub(super) fn check_v1() -> Result<(), String> {
    let root = Path::new(CGROUP_FS);
    if root.join("cgroup.controllers").exists() {
        return Err(format!(
            "{CGROUP_FS} is cgroup v2 (unified): real lab nodes need cgroup v1"
        ));
    }
    if !root.join("memory/cgroup.procs").is_file() {
        return Err(format!(
            "{CGROUP_FS}/memory is no cgroup v1 memory hierarchy"
        ));
    }
    Ok(())
}

/// Makes `path` in every hierarchy (cpuset's CPUs and memory nodes copied down, as a new
/// cpuset starts with none).
pub(super) fn create_cgroup(path: &str) -> Result<(), HostError> {
    for h in hierarchies(false) {
        let mut dir = h.clone();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let parent = dir.clone();
            dir.push(part);
            if !dir.is_dir() {
                fs::create_dir(&dir).map_err(err("creating cgroup", &dir))?;
            }
            if h.ends_with("cpuset") {
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let mine = dir.join(f);
                    let empty = fs::read_to_string(&mine)
                        .map_err(err("reading", &mine))?
                        .trim()
                        .is_empty();
                    if empty {
                        let up =
                            fs::read_to_string(parent.join(f)).map_err(err("reading", &parent))?;
                        fs::write(&mine, up.trim()).map_err(err("writing", &mine))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Moves process `pid` into `path` in every hierarchy.
pub(super) fn enter_cgroup(path: &str, pid: u32) -> Result<(), HostError> {
    for h in hierarchies(false) {
        let procs = h.join(path.trim_start_matches('/')).join("cgroup.procs");
        fs::write(&procs, pid.to_string()).map_err(err("moving a process into", &procs))?;
    }
    Ok(())
}

/// Every process in `path` or below, in any hierarchy.
pub(super) fn pids_in(path: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for h in hierarchies(true) {
        let root = h.join(path.trim_start_matches('/'));
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            if let Ok(t) = fs::read_to_string(d.join("cgroup.procs")) {
                pids.extend(t.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
            if let Ok(rd) = fs::read_dir(&d) {
                stack.extend(
                    rd.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.is_dir()),
                );
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Kills (SIGKILL) every process in `path` until none is left (at most 10 s), then removes the
/// cgroup in every hierarchy, and its parents up to the session's while they are empty.
/// Returns how many processes it killed.
pub(super) fn remove_cgroup(path: &str) -> Result<usize, HostError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut killed = 0;
    loop {
        let pids = pids_in(path);
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        for pid in pids {
            // Gone already is what we want.
            if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL)
                .is_ok()
            {
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for h in hierarchies(true) {
        let root = h.join(path.trim_start_matches('/'));
        if !root.is_dir() {
            continue;
        }
        // Children first.
        let mut dirs = vec![root.clone()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(rd) = fs::read_dir(&dirs[i]) {
                dirs.extend(
                    rd.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.is_dir()),
                );
            }
            i += 1;
        }
        for d in dirs.iter().rev() {
            fs::remove_dir(d).map_err(err("removing cgroup", d))?;
        }
        // The lab's own parent (`liqo-lab-<prefix>`) once empty, never above it: those are
        // the session's (or were, for a session that ended), not the lab's.
        if let Some(p) = root.parent().filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("liqo-lab-"))
        }) {
            // Another node of the lab still there keeps it.
            if let Err(e) = fs::remove_dir(p) {
                tracing::debug!(path = %p.display(), error = %e, "the lab's cgroup stays");
            }
        }
    }
    Ok(killed)
}

/// Bind-mounts `dir` on itself and makes it shared: the mounts a process in another mount
/// namespace makes below it (the kubelet's volumes) then show on the host (containerd).
pub(super) fn shared_bind(dir: &Path) -> Result<(), HostError> {
    use nix::mount::{MsFlags, mount};
    let io = |e: nix::Error| std::io::Error::from_raw_os_error(e as i32);
    mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(io)
        .map_err(err("bind-mounting", dir))?;
    mount(
        None::<&str>,
        dir,
        None::<&str>,
        MsFlags::MS_SHARED,
        None::<&str>,
    )
    .map_err(io)
    .map_err(err("making shared", dir))
}

/// Where the kubelet links every container's log (a fixed path of the kubelet's).
const CONTAINER_LOG_LINKS: &str = "/var/log/containers";

/// Removes the kubelet's links in [`CONTAINER_LOG_LINKS`] that point under `dirs` (the nodes'
/// pod logs); a link that does not read is left.
pub(super) fn remove_log_links(dirs: &[&Path]) {
    let Ok(rd) = fs::read_dir(CONTAINER_LOG_LINKS) else {
        return;
    };
    for link in rd.filter_map(Result::ok).map(|e| e.path()) {
        let ours = fs::read_link(&link).is_ok_and(|t| dirs.iter().any(|d| t.starts_with(d)));
        if ours && let Err(e) = fs::remove_file(&link) {
            tracing::warn!(link = %link.display(), error = %e, "removing a container log link");
        }
    }
}

/// Unmounts (lazily) every mount under `dirs`, deepest first; returns how many.
pub(super) fn unmount_under(dirs: &[&Path]) -> Result<usize, HostError> {
    let info = Path::new("/proc/self/mountinfo");
    let text = fs::read_to_string(info).map_err(err("reading", info))?;
    let mounts = mounts_under(&text, dirs);
    for m in &mounts {
        nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH)
            .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
            .map_err(err("unmounting", m))?;
    }
    Ok(mounts.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_s_memory_cgroup_is_found() {
        let t = "9:name=systemd:/\n4:memory:/process_api/27c8\n3:cpuset:/\n0::/\n";
        assert_eq!(memory_cgroup(t).as_deref(), Some("/process_api/27c8"));
        assert_eq!(
            memory_cgroup("5:cpu,cpuacct:/\n6:memory,hugetlb:/x\n").as_deref(),
            Some("/x")
        );
        assert_eq!(memory_cgroup("0::/\n"), None);
        assert_eq!(node_cgroup("/", "lq", "rome", "n1"), "/liqo-lab-lq/rome-n1");
        assert_eq!(
            node_cgroup("/process_api/27c8", "lq", "rome", "n1"),
            "/process_api/27c8/liqo-lab-lq/rome-n1"
        );
    }

    #[test]
    fn mounts_under_the_node_s_directories_come_deepest_first() {
        let info = "\
22 27 0:21 / /proc rw - proc proc rw
90 27 0:50 / /var/lib/liqo-lab/lq/rome-n1/kubelet rw shared:5 - ext4 /dev/vda rw
91 90 0:51 / /var/lib/liqo-lab/lq/rome-n1/kubelet/pods/u/volumes/kubernetes.io~projected/kube-api-access rw - tmpfs tmpfs rw
92 27 0:52 / /run/liqo-lab/lq.d/rome/node-n1/containerd/netns/cni-1 rw - nsfs nsfs rw
93 27 0:53 / /var/lib/liqo-lab/lq/rome-n10/kubelet rw - ext4 /dev/vda rw
94 27 0:54 / /var/lib/liqo-lab/lq/rome-n1/a\\040b rw - tmpfs tmpfs rw
";
        let d1 = Path::new("/var/lib/liqo-lab/lq/rome-n1");
        let d2 = Path::new("/run/liqo-lab/lq.d/rome/node-n1");
        let m = mounts_under(info, &[d1, d2]);
        assert_eq!(m.len(), 4, "{m:?}");
        assert!(m[0].ends_with("kube-api-access"), "{m:?}");
        // A mount never comes after one of its parents.
        for (i, a) in m.iter().enumerate() {
            for b in &m[i + 1..] {
                assert!(
                    !b.starts_with(a) || a == b,
                    "{b:?} after its parent {a:?}: {m:?}"
                );
            }
        }
        assert!(m.contains(&d1.join("a b")), "{m:?}");
        assert!(
            !m.iter()
                .any(|p| p.starts_with("/var/lib/liqo-lab/lq/rome-n10")),
            "{m:?}"
        );
    }
}

//! Podman in a storage of the test's own (a scratch directory), removed on drop with every
//! container and image in it and anything left mounted under it, even when the test fails.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use nix::{
    mount::{MntFlags, umount2},
    sys::statfs::{OVERLAYFS_SUPER_MAGIC, statfs},
};

/// Seconds a container has to stop on SIGTERM before podman kills it.
const STOP_SECS: &str = "10";

/// Podman with its own storage under a scratch directory (which also holds the test's other
/// files: the image archives, the lab's topology).
pub(crate) struct Podman {
    dir: tempfile::TempDir,
    driver: &'static str,
}

impl Podman {
    pub(crate) fn new() -> Podman {
        let dir = tempfile::Builder::new()
            .prefix("liqo-images-test.")
            .tempdir_in("/var/tmp")
            .expect("a scratch directory in /var/tmp");
        // overlay, as build.sh, unless the scratch directory is itself on overlayfs.
        let overlay = std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| {
            f.lines()
                .any(|l| l.split_whitespace().last() == Some("overlay"))
        }) && statfs(dir.path())
            .is_ok_and(|s| s.filesystem_type() != OVERLAYFS_SUPER_MAGIC);
        // The lab's gateways join a node's namespace (--network ns:...), where podman would
        // still set Debian's default sysctl net.ipv4.ping_group_range, which runc refuses
        // outside a network namespace of the container's own.
        let conf = dir.path().join("containers.conf");
        std::fs::write(&conf, "[containers]\ndefault_sysctls = []\n")
            .unwrap_or_else(|e| panic!("writing {}: {e}", conf.display()));
        Podman {
            dir,
            driver: if overlay { "overlay" } else { "vfs" },
        }
    }

    /// The scratch directory.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The environment every podman command gets (also through `liqo-lab`).
    pub(crate) fn env(&self) -> (&'static str, PathBuf) {
        ("CONTAINERS_CONF", self.dir().join("containers.conf"))
    }

    /// `podman` and its global options: this storage, cgroupfs (no systemd here), no event
    /// log, runc (crun refuses cgroup v1 hosts whose cgroup2 hierarchy holds a controller).
    pub(crate) fn words(&self) -> Vec<String> {
        let d = self.dir().display();
        [
            "podman".to_owned(),
            format!("--root={d}/root"),
            format!("--runroot={d}/run"),
            format!("--tmpdir={d}/tmp"),
            format!("--storage-driver={}", self.driver),
            "--cgroup-manager=cgroupfs".into(),
            "--events-backend=none".into(),
            "--runtime=runc".into(),
        ]
        .into()
    }

    /// A podman command with `args`.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let w = self.words();
        let mut cmd = Command::new(&w[0]);
        let (k, v) = self.env();
        cmd.args(&w[1..]).args(args).env(k, v);
        cmd
    }

    /// Runs podman with `args`; its output whatever its exit status.
    pub(crate) fn output(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        cmd.output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e} (is podman installed? .ci/install)"))
    }

    /// Runs podman with `args`; its stdout, once it exited 0 (else a failure with its stderr).
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "podman {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stops every container (SIGTERM, then SIGKILL after [`STOP_SECS`]); the error's text if
    /// that failed.
    pub(crate) fn stop_all(&self) -> Result<(), String> {
        let out = self.output(&["stop", "--all", "--time", STOP_SECS]);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "podman stop --all: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The containers of this storage (`ps --all --quiet`) once none is left, or what is still
    /// there after `within`: a container run with `--rm` is removed by conmon's cleanup process
    /// after `podman stop` returned, so its removal is awaited, not assumed.
    pub(crate) fn containers_left(&self, within: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = self.ok(&["ps", "--all", "--quiet"]);
            if left.is_empty() || std::time::Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// The mount points under the scratch directory, deepest first.
    pub(crate) fn mounts(&self) -> Vec<String> {
        let dir = self.dir().display().to_string();
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut under: Vec<String> = info
            .lines()
            .filter_map(|l| l.split_whitespace().nth(4))
            .filter(|m| m.starts_with(&dir))
            .map(str::to_owned)
            .collect();
        under.sort_by(|a, b| b.cmp(a));
        under
    }

    /// The processes whose command line names the scratch directory (podman, conmon).
    pub(crate) fn processes(&self) -> Vec<String> {
        let dir = self.dir().display().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            // A process may exit while we look: it is then not found.
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let zombie = std::fs::read_to_string(entry.path().join("stat"))
                .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')));
            if line.contains(&dir) && !zombie {
                found.push(format!("{pid}: {}", line.trim()));
            }
        }
        found
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Every container and image of this storage, then whatever is still mounted under the
        // scratch directory (an overlay layer), then the directory (TempDir's drop). A failure
        // here is reported and the rest still runs: a drop cannot fail the test.
        for args in [
            &["rm", "--all", "--force", "--time", STOP_SECS][..],
            &["rmi", "--all", "--force"][..],
        ] {
            match self.command(args).output() {
                Ok(out) if out.status.success() => {}
                Ok(out) => eprintln!(
                    "cleanup: podman {}: {}: {}",
                    args.join(" "),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Err(e) => eprintln!("cleanup: podman {}: {e}", args.join(" ")),
            }
        }
        for m in self.mounts() {
            if let Err(e) = umount2(m.as_str(), MntFlags::MNT_DETACH) {
                eprintln!("cleanup: unmounting {m}: {e}");
            }
        }
    }
}

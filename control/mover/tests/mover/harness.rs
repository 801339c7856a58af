//! The test's harness: the binary run with or without a token, a receiver in the background
//! (its output in files), a source tree, and the comparison of two trees.

use std::{
    fs::{File, Permissions},
    net::TcpListener,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Output},
    time::{Duration, Instant},
};

pub(crate) const TOKEN: &str = "0123456789abcdef0123456789abcdef-right";
pub(crate) const WRONG: &str = "fedcba9876543210fedcba9876543210-wrong";

pub(crate) fn is_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

pub(crate) fn mover(token: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_liqo-mover"));
    c.env_remove("LIQO_MOVER_TOKEN").env("RUST_LOG", "info");
    if let Some(t) = token {
        c.env("LIQO_MOVER_TOKEN", t);
    }
    c
}

/// A running receiver, its stdout and stderr in files of `t`.
pub(crate) struct Receiver {
    pub(crate) child: Child,
    out: PathBuf,
    err: PathBuf,
}

pub(crate) fn spawn_receiver(t: &Path, dest: &Path, port: u16, extra: &[&str]) -> Receiver {
    let (out, err) = (t.join("receiver.out"), t.join("receiver.err"));
    let child = mover(Some(TOKEN))
        .args(["receive", "--dir", dest.to_str().unwrap(), "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--timeout-seconds", "120"])
        .args(extra)
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    Receiver { child, out, err }
}

impl Receiver {
    /// Its exit status, stdout and stderr, within `secs` (killed after).
    pub(crate) fn wait(mut self, secs: u64) -> (ExitStatus, String, String) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                if let Err(e) = self.child.kill().and_then(|()| self.child.wait().map(drop)) {
                    eprintln!("stopping the receiver: {e}");
                }
                panic!(
                    "the receiver did not exit within {secs} s: {}",
                    std::fs::read_to_string(&self.err).unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        (status, read(&self.out), read(&self.err))
    }
}

pub(crate) fn send(src: &Path, port: u16, token: &str, extra: &[&str]) -> Output {
    mover(Some(token))
        .args(["send", "--dir", src.to_str().unwrap(), "--to"])
        .arg(format!("localhost:{port}"))
        .args(["--connect-timeout-seconds", "60"])
        .args(extra)
        .output()
        .unwrap()
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A source tree: nested directories, an empty file, 5 MiB of pseudo-random bytes, a 0600
/// file, symbolic links (relative, absolute, dangling), an odd name, and (as root) entries
/// owned by 1234. Returns (files, dirs, symlinks, bytes).
pub(crate) fn make_source(src: &Path) -> (u64, u64, u64, u64) {
    std::fs::create_dir_all(src.join("a/b/c")).unwrap();
    std::fs::create_dir(src.join("private")).unwrap();
    std::fs::write(src.join("a/b/c/deep.txt"), "deep\n").unwrap();
    std::fs::write(src.join("empty"), "").unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let big: Vec<u8> = (0..5 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(src.join("a/big.bin"), &big).unwrap();
    std::fs::write(src.join("private/secret"), "s3cr3t").unwrap();
    std::fs::set_permissions(src.join("private/secret"), Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(src.join("private"), Permissions::from_mode(0o2750)).unwrap();
    std::fs::write(src.join("odd name\n"), "odd").unwrap();
    std::os::unix::fs::symlink("a/b/c/deep.txt", src.join("link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", src.join("a/dangling")).unwrap();
    let mut files = (5, 4, 2, 5 + (5 << 20) + 6 + 3);
    if is_root() {
        std::fs::write(src.join("a/owned"), "by 1234").unwrap();
        std::os::unix::fs::chown(src.join("a/owned"), Some(1234), Some(4321)).unwrap();
        std::os::unix::fs::chown(src.join("a/b"), Some(1234), Some(1234)).unwrap();
        std::os::unix::fs::lchown(src.join("link"), Some(1234), Some(99)).unwrap();
        files.0 += 1;
        files.3 += 7;
    }
    files
}

/// Every entry of `a` is in `b` with the same kind, mode, owner (with `owners`), content or
/// target and modification time (not for links); and `b` has nothing else.
pub(crate) fn assert_same_tree(a: &Path, b: &Path, owners: bool) {
    let list = |d: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "lost+found")
            .collect();
        names.sort();
        names
    };
    assert_eq!(list(a), list(b), "{} vs {}", a.display(), b.display());
    for name in list(a) {
        let (pa, pb) = (a.join(&name), b.join(&name));
        let (ma, mb) = (
            std::fs::symlink_metadata(&pa).unwrap(),
            std::fs::symlink_metadata(&pb).unwrap(),
        );
        let what = pa.display();
        assert_eq!(ma.file_type(), mb.file_type(), "{what}");
        if owners {
            assert_eq!((ma.uid(), ma.gid()), (mb.uid(), mb.gid()), "{what}: owner");
        }
        if ma.is_symlink() {
            assert_eq!(
                std::fs::read_link(&pa).unwrap(),
                std::fs::read_link(&pb).unwrap()
            );
            continue;
        }
        assert_eq!(ma.mode(), mb.mode(), "{what}: mode");
        assert_eq!(
            (ma.mtime(), ma.mtime_nsec()),
            (mb.mtime(), mb.mtime_nsec()),
            "{what}: mtime"
        );
        if ma.is_dir() {
            assert_same_tree(&pa, &pb, owners);
        } else {
            assert!(
                std::fs::read(&pa).unwrap() == std::fs::read(&pb).unwrap(),
                "{what}"
            );
        }
    }
}

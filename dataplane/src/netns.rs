//! Named network namespaces, compatible with `ip netns`.
//!
//! A namespace is a bind mount of an nsfs inode on a file under [`NETNS_DIR`]. Work inside a
//! namespace runs on a dedicated thread that enters it ([`Netns::run`]); the caller's thread never
//! changes namespace. Sockets opened on that thread (netlink, TCP, UDP) stay bound to the
//! namespace after the thread ends, which is how the rest of the crate talks to the kernel there.

use std::{
    fs::{self, File, OpenOptions},
    io,
    os::{
        fd::{AsFd, BorrowedFd},
        unix::{fs::MetadataExt, fs::OpenOptionsExt, process::CommandExt},
    },
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    thread,
};

use nix::{
    errno::Errno,
    mount::{MntFlags, MsFlags, mount, umount2},
    sched::{CloneFlags, setns, unshare},
};

use crate::names::NetnsName;

/// Where named namespaces live (the directory `ip netns` uses).
pub const NETNS_DIR: &str = "/run/netns";

/// `statfs` magic of nsfs, the filesystem of namespace inodes.
const NSFS_MAGIC: i64 = 0x6e73_6673;

/// What went wrong with a namespace.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A namespace with this name exists already.
    #[error("network namespace {0} already exists")]
    AlreadyExists(NetnsName),
    /// No namespace with this name exists.
    #[error("network namespace {0} does not exist")]
    NotFound(NetnsName),
    /// The entry exists but is not a mounted namespace (left over by a crash).
    #[error("{0} is not a mounted network namespace")]
    NotANamespace(PathBuf),
    /// A system call failed.
    #[error("{op} for network namespace {name}")]
    Sys {
        /// What was being done.
        op: &'static str,
        /// The namespace.
        name: NetnsName,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Preparing the namespace directory failed.
    #[error("preparing {NETNS_DIR}")]
    Dir(#[source] io::Error),
}

fn sys<'a>(op: &'static str, name: &'a NetnsName) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Sys {
        op,
        name: name.clone(),
        source,
    }
}

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// An open handle on a named network namespace.
///
/// Cloning is cheap; the handle keeps the namespace alive even if its entry is deleted.
#[derive(Debug, Clone)]
pub struct Netns {
    name: NetnsName,
    file: Arc<File>,
}

impl Netns {
    /// Path of the entry for `name`.
    pub fn path_of(name: &NetnsName) -> PathBuf {
        Path::new(NETNS_DIR).join(name.as_str())
    }

    /// Creates a new, empty namespace named `name` (like `ip netns add`).
    ///
    /// Fails with [`Error::AlreadyExists`] if the name is taken. On any failure nothing is left
    /// behind.
    pub fn create(name: &NetnsName) -> Result<Netns, Error> {
        prepare_dir()?;
        let path = Self::path_of(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::AlreadyExists(name.clone()));
            }
            Err(e) => return Err(sys("creating the namespace entry", name)(e)),
        }
        let mounted = thread::scope(|s| {
            s.spawn(|| -> io::Result<()> {
                unshare(CloneFlags::CLONE_NEWNET).map_err(errno)?;
                mount(
                    Some("/proc/thread-self/ns/net"),
                    &path,
                    Some("none"),
                    MsFlags::MS_BIND,
                    None::<&str>,
                )
                .map_err(errno)
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
        });
        if let Err(e) = mounted {
            // The mount failure is the error to return; a leftover entry is only worth a log.
            if let Err(rm) = fs::remove_file(&path)
                && rm.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(netns = %name, error = %rm, "removing the half-created entry");
            }
            return Err(sys("creating", name)(e));
        }
        Self::open(name)
    }

    /// Opens an existing namespace.
    pub fn open(name: &NetnsName) -> Result<Netns, Error> {
        let path = Self::path_of(name);
        let file = File::open(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::NotFound(name.clone()),
            _ => sys("opening", name)(e),
        })?;
        let fs = nix::sys::statfs::fstatfs(&file).map_err(|e| sys("statfs", name)(errno(e)))?;
        if fs.filesystem_type().0 != NSFS_MAGIC {
            return Err(Error::NotANamespace(path));
        }
        Ok(Netns {
            name: name.clone(),
            file: Arc::new(file),
        })
    }

    /// Deletes the entry `name` (like `ip netns delete`). The namespace itself dies once no
    /// process, open handle or socket refers to it. Deleting a missing entry is not an error:
    /// returns whether there was one. A stale entry (not mounted) is removed too.
    pub fn delete(name: &NetnsName) -> Result<bool, Error> {
        let path = Self::path_of(name);
        if !path.exists() {
            return Ok(false);
        }
        match umount2(&path, MntFlags::MNT_DETACH) {
            Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(sys("unmounting", name)(errno(e))),
        }
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(sys("removing the entry", name)(e)),
        }
    }

    /// Kills (SIGKILL) every process living in `name`, then deletes the entry: what teardown
    /// of a namespace someone ran daemons in needs. Returns how many processes were signalled
    /// and whether there was an entry. A missing namespace is not an error.
    pub fn purge(name: &NetnsName) -> Result<(usize, bool), Error> {
        let mut killed = 0;
        if let Ok(ns) = Netns::open(name) {
            for pid in ns.pids()? {
                match nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                ) {
                    // ESRCH: the process exited meanwhile; that is what we want anyway.
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(e) => tracing::warn!(netns = %name, pid, error = %e, "killing a process"),
                }
                killed += 1;
            }
        }
        Ok((killed, Netns::delete(name)?))
    }

    /// Names of all entries under [`NETNS_DIR`], sorted. Entries whose names this crate would
    /// refuse are skipped.
    pub fn list() -> Result<Vec<NetnsName>, Error> {
        let dir = match fs::read_dir(NETNS_DIR) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::Dir(e)),
        };
        let mut names: Vec<NetnsName> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// The namespace's name.
    pub fn name(&self) -> &NetnsName {
        &self.name
    }

    /// Runs `f` on a fresh thread that has entered this namespace, and returns its result.
    /// The calling thread is never moved. A panic in `f` is propagated.
    pub fn run<T, F>(&self, f: F) -> Result<T, Error>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        thread::scope(|s| {
            let joined = s
                .spawn(|| {
                    setns(self.file.as_fd(), CloneFlags::CLONE_NEWNET)
                        .map_err(|e| sys("entering", &self.name)(errno(e)))?;
                    Ok(f())
                })
                .join();
            match joined {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// A command that runs `program` inside this namespace (like `ip netns exec`, without the
    /// `/sys` remount). The namespace is entered in the child between fork and exec.
    #[expect(
        unsafe_code,
        reason = "Command::pre_exec is the only way to setns in the child"
    )]
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        let file = Arc::clone(&self.file);
        // SAFETY: the closure only calls setns(2), which is async-signal-safe, on an fd that
        // the captured Arc keeps open; it allocates nothing and takes no locks.
        unsafe {
            cmd.pre_exec(move || {
                setns(file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(errno)?;
                Ok(())
            });
        }
        cmd
    }

    /// PIDs of the processes whose network namespace is this one.
    pub fn pids(&self) -> Result<Vec<u32>, Error> {
        let me = self.file.metadata().map_err(sys("stat", &self.name))?;
        let pids = crate::procs::pids().map_err(sys("listing /proc", &self.name))?;
        // A process may exit while we look: it is then not in the answer.
        Ok(pids
            .into_iter()
            .filter(|pid| crate::procs::netns_of(*pid) == Some((me.dev(), me.ino())))
            .collect())
    }
}

impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Makes [`NETNS_DIR`] exist and be a shared mount point, as iproute2 does, so namespace mounts
/// propagate to mount namespaces created later (for example by `ip netns exec`).
fn prepare_dir() -> Result<(), Error> {
    static LOCK: Mutex<bool> = Mutex::new(false);
    let mut done = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if *done {
        return Ok(());
    }
    fs::create_dir_all(NETNS_DIR).map_err(Error::Dir)?;
    let shared = || {
        mount(
            None::<&str>,
            NETNS_DIR,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    match shared() {
        Ok(()) => {}
        Err(Errno::EINVAL) => {
            // Not a mount point yet: bind it onto itself (recursively, so existing entries stay
            // visible), then mark it shared.
            mount(
                Some(NETNS_DIR),
                NETNS_DIR,
                Some("none"),
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .map_err(|e| Error::Dir(errno(e)))?;
            shared().map_err(|e| Error::Dir(errno(e)))?;
        }
        Err(e) => return Err(Error::Dir(errno(e))),
    }
    *done = true;
    Ok(())
}

/// Panics with a clear message unless the process can administer the network (runs as root).
/// Privileged tests call this first so that, run unprivileged, they fail saying why.
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for network namespaces); \
         run it as root, e.g. `sudo -E cargo test` or `bash .ci/run`"
    );
}

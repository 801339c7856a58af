//! The config source: a file, watched.
//!
//! The file's *directory* is watched with inotify, so every way of replacing the file is seen
//! within milliseconds: writing it in place, an atomic rename over it, and a Kubernetes
//! ConfigMap mount (the file is a symlink through `..data`, which the kubelet swaps with a
//! rename). A tick of about a second backs the watch up (a file reached through a symlink to
//! another directory, a directory created later, an inotify instance that could not be had) and
//! retries failed applies. Bursts of events (a write, a close and a rename) are coalesced into
//! one look at the file. A slower resync (every [`RESYNC`] by default) asks for the running
//! config to be converged again, so that state changed behind the daemon's back comes back.

use std::{
    io,
    os::fd::{AsFd, AsRawFd, RawFd},
    path::{Path, PathBuf},
    time::Duration,
};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::{
    io::unix::AsyncFd,
    time::{Instant, Interval, MissedTickBehavior},
};

use crate::core::Trigger;

/// The default tick.
pub const TICK: Duration = Duration::from_secs(1);

/// The default resync.
pub const RESYNC: Duration = Duration::from_secs(10);

/// How long a burst of events may be quiet before the file is read.
const SETTLE: Duration = Duration::from_millis(5);
/// The longest a burst delays the read.
const SETTLE_MAX: Duration = Duration::from_millis(100);

/// The config file cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {}", path.display())]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

impl ReadError {
    /// The error with its cause, on one line.
    pub fn line(&self) -> String {
        format!("{self}: {}", self.source)
    }
}

struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A watched config file.
pub struct ConfigFile {
    path: PathBuf,
    dir: PathBuf,
    watch: Option<AsyncFd<Fd>>,
    tick: Interval,
    resync: Option<Interval>,
}

impl ConfigFile {
    /// Watches `path` with the default [`TICK`] and [`RESYNC`]. Must run inside a tokio
    /// runtime. Watching starts now, so a change made after this call is seen even if the
    /// first [`read`](Self::read) comes later.
    pub fn watch(path: impl Into<PathBuf>) -> ConfigFile {
        ConfigFile::with_tick(path, TICK).with_resync(Some(RESYNC))
    }

    /// Converges the running config again every `every` ([`Trigger::Resync`]), or never with
    /// `None` (a zero duration counts as `None`).
    #[must_use]
    pub fn with_resync(mut self, every: Option<Duration>) -> ConfigFile {
        self.resync = every.filter(|d| !d.is_zero()).map(|d| {
            let mut i = tokio::time::interval_at(Instant::now() + d, d);
            i.set_missed_tick_behavior(MissedTickBehavior::Delay);
            i
        });
        self
    }

    /// Watches `path`, ticking every `tick`, with no resync.
    pub fn with_tick(path: impl Into<PathBuf>, tick: Duration) -> ConfigFile {
        let path = path.into();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut tick = tokio::time::interval_at(Instant::now() + tick, tick);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut f = ConfigFile {
            path,
            dir,
            watch: None,
            tick,
            resync: None,
        };
        f.rewatch();
        f
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether its directory is watched (otherwise only the tick looks at it).
    pub fn watching(&self) -> bool {
        self.watch.is_some()
    }

    /// The file's text now.
    pub fn read(&self) -> Result<String, ReadError> {
        std::fs::read_to_string(&self.path).map_err(|source| ReadError {
            path: self.path.clone(),
            source,
        })
    }

    /// The file's text, waiting up to `wait` for it to appear (a daemon started before whoever
    /// writes its config, as the chart's operators do): the first read's error at once when it
    /// is not a missing file or `wait` is zero, else the last one when `wait` ends.
    pub async fn first_read(&mut self, wait: Duration) -> Result<String, ReadError> {
        let deadline = Instant::now() + wait;
        let mut said = false;
        loop {
            match self.read() {
                Err(e)
                    if e.source.kind() == io::ErrorKind::NotFound && Instant::now() < deadline =>
                {
                    if !said {
                        tracing::info!(config = %self.path.display(), ?wait, "waiting for the config file");
                        said = true;
                    }
                    tokio::select! {
                        _ = self.next() => {}
                        _ = tokio::time::sleep_until(deadline) => {}
                    }
                }
                r => return r,
            }
        }
    }

    /// [`ConfigFile::first_read`], given up when `stop` (the daemon's shutdown signal) comes
    /// first: `Ok(None)` then, and the daemon ends cleanly without having started.
    pub async fn first_read_or_stop<S>(
        &mut self,
        wait: Duration,
        stop: &mut S,
    ) -> Result<Option<String>, ReadError>
    where
        S: std::future::Future + Unpin,
        S::Output: std::fmt::Debug,
    {
        tokio::select! {
            r = self.first_read(wait) => r.map(Some),
            s = stop => {
                tracing::info!(signal = ?s, "stopped while waiting for the config file");
                Ok(None)
            }
        }
    }

    /// Waits until the file may have changed, the tick or the resync.
    pub async fn next(&mut self) -> Trigger {
        let every = &mut self.resync;
        let resync = async {
            match every {
                Some(i) => i.tick().await,
                None => std::future::pending().await,
            }
        };
        let changed = match &self.watch {
            Some(fd) => tokio::select! {
                biased;
                r = events(fd) => Some(r),
                _ = resync => return Trigger::Resync,
                _ = self.tick.tick() => None,
            },
            None => tokio::select! {
                biased;
                _ = resync => return Trigger::Resync,
                _ = self.tick.tick() => None,
            },
        };
        match changed {
            None => {
                if self.watch.is_none() {
                    self.rewatch();
                }
                Trigger::Tick
            }
            Some(r) => {
                if self.keep_watching(r) {
                    self.settle().await;
                }
                Trigger::Changed
            }
        }
    }

    /// Whether the watch still works after `events` returned `r` (if not, it is dropped and
    /// set up again on the next tick).
    fn keep_watching(&mut self, r: io::Result<bool>) -> bool {
        match r {
            Ok(true) => return true,
            Ok(false) => {
                tracing::warn!(dir = %self.dir.display(), "the config directory's watch ended (removed or moved); watching again on the next tick");
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "reading inotify events failed; watching again on the next tick");
            }
        }
        self.watch = None;
        false
    }

    /// Waits until no event came for [`SETTLE`] (at most [`SETTLE_MAX`]).
    async fn settle(&mut self) {
        let end = Instant::now() + SETTLE_MAX;
        while let Some(fd) = &self.watch {
            let Ok(r) = tokio::time::timeout(SETTLE, events(fd)).await else {
                return; // quiet
            };
            if !self.keep_watching(r) || Instant::now() >= end {
                return;
            }
        }
    }

    fn rewatch(&mut self) {
        match watch_dir(&self.dir) {
            Ok(fd) => {
                tracing::debug!(dir = %self.dir.display(), "watching the config directory");
                self.watch = Some(fd);
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot watch the config directory; looking at the file every tick");
            }
        }
    }
}

#[expect(
    unsafe_code,
    reason = "tokio's registration of a descriptor is unsafe since 1.54 (its safe `new` is deprecated)"
)]
fn watch_dir(dir: &Path) -> io::Result<AsyncFd<Fd>> {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    inotify.add_watch(
        dir,
        AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR,
    )?;
    // SAFETY: `Fd` owns the inotify instance, whose descriptor stays open and the same until
    // the `AsyncFd` (which owns the `Fd`) is dropped.
    unsafe { AsyncFd::register_with_interest(Fd(inotify), tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

/// Waits for events and drains them: `Ok(true)` if something changed, `Ok(false)` if the watch
/// ended (the directory was removed or moved).
async fn events(fd: &AsyncFd<Fd>) -> io::Result<bool> {
    loop {
        let mut guard = fd.readable().await?;
        match guard.try_io(|inner| inner.get_ref().0.read_events().map_err(io::Error::from)) {
            Ok(Ok(events)) => {
                let ended = events.iter().any(|e| {
                    e.mask.intersects(
                        AddWatchFlags::IN_IGNORED
                            | AddWatchFlags::IN_DELETE_SELF
                            | AddWatchFlags::IN_MOVE_SELF
                            | AddWatchFlags::IN_UNMOUNT,
                    )
                });
                return Ok(!ended);
            }
            Ok(Err(e)) => return Err(e),
            // Spurious readiness: wait again.
            Err(_would_block) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for the next trigger that is not a tick, up to `limit`.
    async fn changed(f: &mut ConfigFile, limit: Duration) -> bool {
        tokio::time::timeout(limit, async { while f.next().await != Trigger::Changed {} })
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn sees_writes_renames_and_symlink_swaps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "one").unwrap();
        // A long tick: every change below must come from the watch.
        let mut f = ConfigFile::with_tick(&path, Duration::from_secs(3600));
        assert!(f.watching());
        assert_eq!(f.read().unwrap(), "one");

        std::fs::write(&path, "two").unwrap();
        assert!(
            changed(&mut f, Duration::from_secs(5)).await,
            "an in-place write"
        );
        assert_eq!(f.read().unwrap(), "two");

        let tmp = dir.path().join("c.yaml.tmp");
        std::fs::write(&tmp, "three").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(changed(&mut f, Duration::from_secs(5)).await, "a rename");
        assert_eq!(f.read().unwrap(), "three");

        // A ConfigMap: c.yaml -> ..data/c.yaml, ..data -> ..v1; the kubelet makes ..v2 and
        // renames a new symlink over ..data.
        let cm = dir.path().join("cm");
        std::fs::create_dir_all(cm.join("..v1")).unwrap();
        std::fs::write(cm.join("..v1/c.yaml"), "v1").unwrap();
        std::os::unix::fs::symlink("..v1", cm.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/c.yaml", cm.join("c.yaml")).unwrap();
        let mut f = ConfigFile::with_tick(cm.join("c.yaml"), Duration::from_secs(3600));
        assert_eq!(f.read().unwrap(), "v1");
        std::fs::create_dir_all(cm.join("..v2")).unwrap();
        std::fs::write(cm.join("..v2/c.yaml"), "v2").unwrap();
        std::os::unix::fs::symlink("..v2", cm.join("..data_tmp")).unwrap();
        std::fs::rename(cm.join("..data_tmp"), cm.join("..data")).unwrap();
        assert!(
            changed(&mut f, Duration::from_secs(5)).await,
            "a ConfigMap swap"
        );
        assert_eq!(f.read().unwrap(), "v2");
    }

    #[tokio::test]
    async fn a_missing_file_is_an_error_and_its_directory_is_watched_once_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("later");
        let path = sub.join("c.yaml");
        let mut f = ConfigFile::with_tick(&path, Duration::from_millis(20));
        assert!(!f.watching(), "no directory yet");
        let e = f.read().unwrap_err();
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
        assert!(
            e.line().contains("c.yaml") && e.line().contains("No such file"),
            "{}",
            e.line()
        );
        assert_eq!(f.next().await, Trigger::Tick);
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(f.next().await, Trigger::Tick);
        assert!(f.watching(), "watched on the tick after it appeared");
        std::fs::write(&path, "x").unwrap();
        assert_eq!(f.read().unwrap(), "x");
        // A directory in the file's place cannot be read either.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(f.read().is_err());
    }

    #[tokio::test]
    async fn the_first_read_waits_for_a_missing_file_only_as_long_as_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        let mut f = ConfigFile::with_tick(&path, Duration::from_millis(20));
        // No wait: the error at once.
        let t = std::time::Instant::now();
        let e = f.first_read(Duration::ZERO).await.unwrap_err();
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
        assert!(t.elapsed() < Duration::from_millis(500));
        // A wait that ends: the error after it.
        let t = std::time::Instant::now();
        let e = f.first_read(Duration::from_millis(200)).await.unwrap_err();
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );
        // Written while it waits: read.
        let p = path.clone();
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            std::fs::write(p, "v1").unwrap();
        });
        assert_eq!(f.first_read(Duration::from_secs(10)).await.unwrap(), "v1");
        writer.await.unwrap();
        // Another error (a directory in its place) is not waited on.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let t = std::time::Instant::now();
        assert!(f.first_read(Duration::from_secs(10)).await.is_err());
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_removed_directory_is_watched_again_when_it_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("c.yaml");
        let mut f = ConfigFile::with_tick(&path, Duration::from_millis(50));
        assert!(f.watching());
        std::fs::remove_dir(&sub).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while f.watching() {
            assert!(Instant::now() < deadline, "the ended watch is noticed");
            f.next().await;
        }
        std::fs::create_dir(&sub).unwrap();
        while !f.watching() {
            assert!(Instant::now() < deadline, "watched again");
            f.next().await;
        }
        std::fs::write(&path, "back").unwrap();
        assert!(changed(&mut f, Duration::from_secs(5)).await);
    }
}

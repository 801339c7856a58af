//! The data directory of the database-like mode: `POST /append`'s lines go to the file
//! [`FILE`] in it, `GET /log` reads that file back. One line per append, written in one write
//! on a file opened for appending, on disk (`sync_data`) before the answer. A mutex orders the
//! file operations of this process, so appends never interleave and each knows the line count
//! it made. The file operations run on tokio's blocking threads, the mutex taken there: a
//! request dropped by its client cannot release it while the write is still going on.

use std::{
    fs::{File, OpenOptions},
    io::{self, Read, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

/// The log's file name in the data directory.
pub(crate) const FILE: &str = "log";

/// A data directory's I/O failure, naming the path and the cause (the answer is a 500).
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}: {source}", .path.display())]
pub(crate) struct StoreError {
    /// What was being done: `open`, `read`, `append to`, `sync`…
    pub(crate) op: &'static str,
    pub(crate) path: PathBuf,
    #[source]
    pub(crate) source: io::Error,
}

fn fail(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_owned();
    move |source| StoreError { op, path, source }
}

/// The log file of a data directory.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    path: PathBuf,
    lock: Mutex<()>,
}

impl Store {
    /// The store of `dir`, which must be a directory (the file is created by the first append).
    pub(crate) fn open(dir: &Path) -> Result<Store, StoreError> {
        let meta = std::fs::metadata(dir).map_err(fail("use the data directory", dir))?;
        if !meta.is_dir() {
            return Err(fail("use the data directory", dir)(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        Ok(Store {
            dir: dir.to_owned(),
            path: dir.join(FILE),
            lock: Mutex::new(()),
        })
    }

    /// The log file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` and its newline; the file's line count after it.
    pub(crate) async fn append(self: Arc<Self>, line: String) -> Result<u64, StoreError> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || self.append_now(&line))
            .await
            .unwrap_or_else(|e| Err(fail("append to", &path)(io::Error::other(e))))
    }

    /// The file's whole content; empty when it does not exist yet.
    pub(crate) async fn read(self: Arc<Self>) -> Result<Vec<u8>, StoreError> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || self.read_now())
            .await
            .unwrap_or_else(|e| Err(fail("read", &path)(io::Error::other(e))))
    }

    fn append_now(&self, line: &str) -> Result<u64, StoreError> {
        // A panic while holding it leaves no state to repair: the file is re-read each time.
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(fail("open", &self.path))?;
        // The count is the file's (re-read on each append: a demo's log, not a database), so an
        // edit or a removal of the file behind the server's back is counted right.
        let mut before = Vec::new();
        file.read_to_end(&mut before)
            .map_err(fail("read", &self.path))?;
        let lines = before.iter().filter(|&&b| b == b'\n').count() as u64;
        // A last line without its newline (a write cut by a crash or a full disk): ended first,
        // in the same write, so that the new line stays a line of its own.
        let torn = before.last().is_some_and(|&b| b != b'\n');
        let mut bytes = Vec::with_capacity(line.len() + 2);
        if torn {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        // One buffer, one write(2) on a regular file opened with O_APPEND.
        file.write_all(&bytes)
            .map_err(fail("append to", &self.path))?;
        file.sync_data().map_err(fail("sync", &self.path))?;
        if before.is_empty() {
            // Maybe a new file: its directory entry on disk too.
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(fail("sync the directory", &self.dir))?;
        }
        Ok(lines + u64::from(torn) + 1)
    }

    fn read_now(&self) -> Result<Vec<u8>, StoreError> {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(fail("read", &self.path)(source)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary one, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!(
                "liqo-demo-store-{name}-{}-{:?}",
                std::process::id(),
                std::time::SystemTime::now()
            ));
            std::fs::create_dir(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            if let Err(e) = std::fs::remove_dir_all(&self.0) {
                eprintln!("removing {}: {e}", self.0.display());
            }
        }
    }

    #[tokio::test]
    async fn appends_lines_counts_them_and_reads_them_back() {
        let dir = TempDir::new("append");
        let store = Arc::new(Store::open(&dir.0).unwrap());
        assert_eq!(store.path(), dir.0.join("log"));
        assert_eq!(store.clone().read().await.unwrap(), b"");
        assert!(!store.path().exists(), "reading creates nothing");
        assert_eq!(store.clone().append("one".into()).await.unwrap(), 1);
        assert_eq!(store.clone().append("two 2".into()).await.unwrap(), 2);
        assert_eq!(store.clone().read().await.unwrap(), b"one\ntwo 2\n");
        assert_eq!(std::fs::read(dir.0.join("log")).unwrap(), b"one\ntwo 2\n");
    }

    #[tokio::test]
    async fn a_torn_last_line_is_ended_before_the_next_one() {
        let dir = TempDir::new("torn");
        std::fs::write(dir.0.join("log"), "whole\ncut sho").unwrap();
        let store = Arc::new(Store::open(&dir.0).unwrap());
        assert_eq!(store.clone().append("next".into()).await.unwrap(), 3);
        assert_eq!(
            std::fs::read_to_string(dir.0.join("log")).unwrap(),
            "whole\ncut sho\nnext\n"
        );
    }

    #[tokio::test]
    async fn concurrent_appends_each_get_their_own_count() {
        let dir = TempDir::new("concurrent");
        let store = Arc::new(Store::open(&dir.0).unwrap());
        let tasks: Vec<_> = (0..32)
            .map(|i| tokio::spawn(store.clone().append(format!("entry {i:02}"))))
            .collect();
        let mut counts = Vec::new();
        for t in tasks {
            counts.push(t.await.unwrap().unwrap());
        }
        counts.sort_unstable();
        assert_eq!(counts, (1..=32).collect::<Vec<u64>>());
        let text = std::fs::read_to_string(dir.0.join("log")).unwrap();
        let mut lines: Vec<_> = text.lines().collect();
        lines.sort_unstable();
        let expect: Vec<_> = (0..32).map(|i| format!("entry {i:02}")).collect();
        assert_eq!(lines, expect);
    }

    #[tokio::test]
    async fn errors_name_the_path_and_the_cause() {
        let dir = TempDir::new("errors");
        let missing = dir.0.join("missing");
        let e = Store::open(&missing).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot use the data directory {}: ",
                missing.display()
            )) && std::error::Error::source(&e).is_some(),
            "{text}"
        );
        let file = dir.0.join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = Store::open(&file).unwrap_err().to_string();
        assert!(e.ends_with(": not a directory"), "{e}");

        // The log's path taken by a directory: both operations fail naming it.
        std::fs::create_dir(dir.0.join("log")).unwrap();
        let store = Arc::new(Store::open(&dir.0).unwrap());
        let log = dir.0.join("log");
        let e = store.clone().append("x".into()).await.unwrap_err();
        assert!(
            e.to_string().contains(&format!(" {}: ", log.display())),
            "{e}"
        );
        let e = store.read().await.unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot read {}: ", log.display())),
            "{e}"
        );
    }
}

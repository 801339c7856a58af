//! Persistence behind a small trait: the IPAM's state saved after every change, loaded at
//! start. The default is a crash-safe file ([`FileStore`]); in a cluster, one ConfigMap in the
//! API server written with compare-and-swap ([`configmap::ConfigMapStore`]); [`MemStore`] for
//! tests.
//!
//! The trait is synchronous: a save happens under the service's writer lock, between a change
//! and its acknowledgement. Callers on an async runtime run it off the runtime's workers (the
//! service does, with `spawn_blocking`); the ConfigMap store does its own async I/O on a thread
//! of its own.

pub mod configmap;

use std::{
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
};

use crate::state::State;

/// What went wrong loading or saving.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the file failed.
    #[error("{op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file does not hold a valid state.
    #[error("{path} is not a valid IPAM state")]
    Decode {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Another writer changed the ConfigMap since this store last read or wrote it: nothing
    /// was written.
    #[error(
        "ConfigMap {configmap} was changed by another writer (expected resourceVersion \
         {expected}); refusing to overwrite it (restart liqo-ipam to load what it holds)"
    )]
    Conflict {
        /// The ConfigMap, `namespace/name`.
        configmap: String,
        /// The resourceVersion this store last saw (`none`: it expected to create it).
        expected: String,
    },
    /// Reading or writing the ConfigMap failed otherwise, or it holds no valid state.
    #[error(transparent)]
    ConfigMap(#[from] configmap::ConfigMapError),
}

/// Where the IPAM keeps its state.
pub trait Store {
    /// The last saved state, if any (a store that writes with compare-and-swap remembers the
    /// version it read).
    fn load(&mut self) -> Result<Option<State>, StoreError>;
    /// Replaces the saved state; after it returns `Ok`, a crash loses nothing. On `Err` the
    /// saved state is the previous one, or (an outcome the store could not learn) possibly the
    /// new one, never a mix.
    fn save(&mut self, state: &State) -> Result<(), StoreError>;
    /// Where the state is kept, for people: `file <path>`, `configmap <namespace>/<name>`.
    fn describe(&self) -> String;
}

/// A JSON file replaced atomically: write a temporary file, fsync it, rename it over the old one,
/// fsync the directory. A crash at any point leaves the old or the new state, never a mix.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// A store at `path` (its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> FileStore {
        FileStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, op: &'static str) -> impl FnOnce(io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            op,
            path: self.path.clone(),
            source,
        }
    }
}

impl Store for FileStore {
    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }

    fn load(&mut self) -> Result<Option<State>, StoreError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.err("reading")(e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StoreError::Decode {
                path: self.path.clone(),
                source,
            })
    }

    fn save(&mut self, state: &State) -> Result<(), StoreError> {
        let tmp = self.path.with_extension("tmp");
        let json =
            serde_json::to_vec(state).map_err(|e| self.err("encoding")(io::Error::other(e)))?;
        let mut f = File::create(&tmp).map_err(self.err("creating the temporary file for"))?;
        f.write_all(&json).map_err(self.err("writing"))?;
        f.sync_all().map_err(self.err("syncing"))?;
        drop(f);
        fs::rename(&tmp, &self.path).map_err(self.err("replacing"))?;
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(self.err("syncing the directory of"))?;
        Ok(())
    }
}

/// A store in memory, for tests.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    /// The saved state.
    pub state: Option<State>,
}

impl Store for MemStore {
    fn describe(&self) -> String {
        "memory".to_owned()
    }

    fn load(&mut self) -> Result<Option<State>, StoreError> {
        Ok(self.state.clone())
    }

    fn save(&mut self, state: &State) -> Result<(), StoreError> {
        self.state = Some(state.clone());
        Ok(())
    }
}

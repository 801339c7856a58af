//! Persistence behind a small trait; the default is a crash-safe file.

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
}

/// Where the IPAM keeps its state.
pub trait Store {
    /// The last saved state, if any.
    fn load(&self) -> Result<Option<State>, StoreError>;
    /// Replaces the saved state; after it returns, a crash loses nothing.
    fn save(&mut self, state: &State) -> Result<(), StoreError>;
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
    fn load(&self) -> Result<Option<State>, StoreError> {
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
    fn load(&self) -> Result<Option<State>, StoreError> {
        Ok(self.state.clone())
    }

    fn save(&mut self, state: &State) -> Result<(), StoreError> {
        self.state = Some(state.clone());
        Ok(())
    }
}

//! The daemons' side of the fabric, without Kubernetes: a config file written atomically (the
//! daemon reloads it and names the text it runs by its [`digest`]), one look at a daemon's
//! `/status` for that digest (and, for the gateway, for a peer), and the status fetched over
//! plain HTTP; and the peering core's gateway and overlay sinks over them ([`sinks`]). The
//! operators and the lab share these; nothing here knows of Kubernetes.

use std::{
    fmt, fs,
    io::{self, Write},
    net::SocketAddr,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    str::FromStr,
};

pub use control::network::daemon::{
    HANDSHAKE_FRESH_SECS, Look, Want, gateway_look, overlay_look, runs,
};
pub use liqo_daemon::digest;
use serde::de::DeserializeOwned;

/// Why a file or a status could not be handled.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// Writing a file failed.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Reading a file failed.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A status URL that is not `http://host:port/path`.
    #[error("{url:?} is not an http://<ip>:<port>/<path> URL")]
    BadUrl {
        /// The URL given.
        url: String,
    },
    /// The daemon did not answer.
    #[error("asking {url}")]
    Fetch {
        /// Where.
        url: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The daemon's answer is not its status.
    #[error("decoding the status from {url}")]
    Decode {
        /// Where.
        url: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, synced, renamed over it, the
/// directory synced): a reader sees the old text or the new one. `mode` is the new file's mode
/// (0o600 for a secret: it is never readable by others, not even for a moment).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), FilesError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|source| {
        // The write error is what is returned; a temporary file left behind is only logged.
        match fs::remove_file(&tmp) {
            Err(r) if r.kind() != io::ErrorKind::NotFound => {
                tracing::warn!(file = %tmp.display(), error = %r, "removing a temporary file");
            }
            _ => {}
        }
        FilesError::Write {
            path: path.to_owned(),
            source,
        }
    })
}

/// Writes `text` to `path` atomically (mode 0644).
pub fn write_atomic(path: &Path, text: &str) -> Result<(), FilesError> {
    write_atomic_mode(path, text.as_bytes(), 0o644)
}

/// Writes a daemon's config file atomically and returns the [`digest`] of the text written
/// (what the daemon's `reload.applied.digest` says once it runs it).
pub fn write_config(path: &Path, text: &str) -> Result<String, FilesError> {
    write_atomic(path, text)?;
    Ok(digest(text))
}

/// What [`ensure_config`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// The [`digest`] of the text the file holds now.
    pub digest: String,
    /// Whether it had to be written (it was missing, unreadable or held another text).
    pub written: bool,
}

/// Writes a daemon's config file only if its text differs (a restart of the writer does not
/// touch a file that holds what it would write).
pub fn ensure_config(path: &Path, text: &str) -> Result<Ensured, FilesError> {
    match fs::read_to_string(path) {
        Ok(old) if old == text => Ok(Ensured {
            digest: digest(text),
            written: false,
        }),
        // Missing, unreadable or different: written over; a cause that also stops the write
        // (a bad directory, no permission) is the write's error.
        _ => Ok(Ensured {
            digest: write_config(path, text)?,
            written: true,
        }),
    }
}

/// Where a daemon serves its status: `http://<ip>:<port>/<path>` (the daemons serve plain HTTP
/// on an address of their node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusUrl {
    /// The address.
    pub addr: SocketAddr,
    /// The path (`/status`).
    pub path: String,
}

impl FromStr for StatusUrl {
    type Err = FilesError;

    fn from_str(url: &str) -> Result<StatusUrl, FilesError> {
        let bad = || FilesError::BadUrl { url: url.into() };
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
        Ok(StatusUrl {
            addr,
            path: if path.is_empty() { "/status" } else { path }.into(),
        })
    }
}

impl fmt::Display for StatusUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.addr, self.path)
    }
}

/// Decodes a `/status` body, typed: a body that lacks a field is an error, never a default.
pub fn decode<T: DeserializeOwned>(body: &str, url: &str) -> Result<T, FilesError> {
    serde_json::from_str(body).map_err(|source| FilesError::Decode {
        url: url.into(),
        source,
    })
}

/// Fetches and decodes a daemon's status (blocking; a few seconds at most).
pub fn fetch<T: DeserializeOwned>(url: &StatusUrl) -> Result<T, FilesError> {
    let body =
        liqo_daemon::localhttp::get(url.addr, &url.path).map_err(|source| FilesError::Fetch {
            url: url.to_string(),
            source,
        })?;
    decode(&body, &url.to_string())
}

/// [`fetch`] off the async runtime's threads.
pub async fn fetch_async<T: DeserializeOwned + Send + 'static>(
    url: &StatusUrl,
) -> Result<T, FilesError> {
    let u = url.clone();
    match tokio::task::spawn_blocking(move || fetch(&u)).await {
        Ok(r) => r,
        Err(e) => Err(FilesError::Fetch {
            url: url.to_string(),
            source: io::Error::other(e.to_string()),
        }),
    }
}

pub mod sinks;

#[cfg(test)]
mod tests;

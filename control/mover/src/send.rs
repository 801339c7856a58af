//! `liqo-mover send`: checks the whole source can be sent (a walk: no unsupported file), connects
//! (resolving the name again and retrying every second until the connect timeout: the Service
//! and its DNS name may come late), presents the token, streams every entry while computing its
//! manifest from what it read, and compares the receiver's manifest with it.

use std::{
    fs::Metadata,
    io::{self, BufWriter, Read, Write},
    net::{SocketAddr, TcpStream},
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::PathBuf,
    time::Duration,
};

use sha2::{Digest, Sha256};

mod connect;

pub use connect::{ConnectError, parse_target};

use crate::{
    manifest::{Manifest, Record, Summary},
    token::Token,
    tree::{self, Kind, TreeError, Walk},
    wire::{self, Ack, Attrs, Entry, Mtime, Reply, WireError},
};

/// How long a write to the receiver may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(300);

/// What `send` is told.
#[derive(Clone, Debug)]
pub struct SendOptions {
    /// The directory to copy.
    pub dir: PathBuf,
    /// The receiver, `host:port`.
    pub to: String,
    /// How long to keep trying to connect.
    pub connect_timeout: Duration,
}

/// What a completed send found.
#[derive(Clone, Copy, Debug)]
pub struct SendOutcome {
    /// The manifest of what was read and sent.
    pub local: Summary,
    /// The receiver's manifest of what it has on disk.
    pub remote: Summary,
}

impl SendOutcome {
    /// Whether the two manifests are the same.
    pub fn verified(&self) -> bool {
        self.local.same(&self.remote)
    }
}

/// Why sending failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The source directory could not be read.
    #[error("reading the source directory {dir}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The source holds something that cannot be sent, or could not be walked.
    #[error("the source {dir}")]
    Source {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: TreeError,
    },
    /// Reading a source file failed.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A source file's length changed while it was sent.
    #[error("{path} changed while it was sent: {size} bytes announced")]
    Changed {
        /// The file.
        path: PathBuf,
        /// The announced size.
        size: u64,
    },
    /// No connection within the connect timeout (its message and sources are the
    /// [`ConnectError`]'s).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The receiver refused the token.
    #[error(
        "the receiver {peer} refused the token (is {} the receiver's?)",
        crate::TOKEN_ENV
    )]
    Refused {
        /// The receiver.
        peer: SocketAddr,
    },
    /// The receiver failed, and said why.
    #[error("the receiver {peer} failed: {message}")]
    ReceiverFailed {
        /// The receiver.
        peer: SocketAddr,
        /// Its error.
        message: String,
    },
    /// Talking to the receiver failed.
    #[error("talking to the receiver {peer}")]
    Peer {
        /// The receiver.
        peer: SocketAddr,
        /// Why.
        #[source]
        source: WireError,
    },
}

/// Sends `opts.dir` to the receiver at `opts.to`.
pub fn send(opts: &SendOptions, token: &Token) -> Result<SendOutcome, SendError> {
    let dir = &opts.dir;
    let root = std::fs::metadata(dir).map_err(|source| SendError::Dir {
        dir: dir.clone(),
        source,
    })?;
    if !root.is_dir() {
        return Err(SendError::Dir {
            dir: dir.clone(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    let source_err = |source| SendError::Source {
        dir: dir.clone(),
        source,
    };
    // Everything sendable before the receiver writes anything.
    let mut checked = 0u64;
    for node in Walk::new(dir) {
        node.map_err(source_err)?;
        checked += 1;
    }
    tracing::info!(dir = %dir.display(), entries = checked, "source checked; connecting");
    let stream = connect::connect(&opts.to, opts.connect_timeout)?;
    let peer = stream.peer_addr().map_err(|source| ConnectError {
        to: opts.to.clone(),
        secs: opts.connect_timeout.as_secs(),
        source,
    })?;
    let peer_err = |source| SendError::Peer { peer, source };
    let setup = |s: &TcpStream| {
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        s.set_write_timeout(Some(WRITE_TIMEOUT))
    };
    setup(&stream).map_err(|e| peer_err(e.into()))?;
    wire::write_hello(&mut &stream, token.as_bytes()).map_err(peer_err)?;
    if !wire::read_status(&mut &stream).map_err(peer_err)? {
        return Err(SendError::Refused { peer });
    }
    tracing::info!(%peer, "the receiver accepted the token; sending");

    let mut w = BufWriter::with_capacity(256 * 1024, &stream);
    let mut m = Manifest::default();
    let stream_failed = |source: WireError| receiver_failure(&stream, peer, source);
    wire::write_entry(&mut w, &Entry::Root(attrs(&root))).map_err(stream_failed)?;
    m.push(Record::root(&root));
    let mut buf = vec![0; 256 * 1024];
    for node in Walk::new(dir) {
        let node = node.map_err(source_err)?;
        match node.kind {
            Kind::Dir => {
                let entry = Entry::Dir {
                    path: node.path.clone(),
                    attrs: attrs(&node.meta),
                };
                wire::write_entry(&mut w, &entry).map_err(stream_failed)?;
                m.push(Record::dir(node.path, &node.meta));
            }
            Kind::Symlink => {
                let target = std::fs::read_link(&node.abs).map_err(|source| SendError::Read {
                    path: node.abs.clone(),
                    source,
                })?;
                let target = target.as_os_str().as_bytes().to_vec();
                let entry = Entry::Symlink {
                    path: node.path.clone(),
                    target: target.clone(),
                    uid: node.meta.uid(),
                    gid: node.meta.gid(),
                };
                wire::write_entry(&mut w, &entry).map_err(stream_failed)?;
                m.push(Record::symlink(node.path, &node.meta, &target));
            }
            Kind::File => {
                let (mut file, meta) = tree::open_walked(&node).map_err(source_err)?;
                let size = meta.len();
                let entry = Entry::File {
                    path: node.path.clone(),
                    attrs: attrs(&meta),
                    size,
                };
                wire::write_entry(&mut w, &entry).map_err(stream_failed)?;
                let hash = send_content(&mut file, &mut w, size, &node.abs, &mut buf)
                    .map_err(|e| e.into_send(&stream, peer))?;
                m.push(Record::file(node.path, &meta, size, hash));
            }
        }
    }
    wire::write_entry(&mut w, &Entry::End).map_err(stream_failed)?;
    w.flush().map_err(|e| stream_failed(e.into()))?;
    drop(w);
    tracing::info!("everything sent; waiting for the receiver's manifest (it re-reads its disk)");
    // The receiver syncs and re-reads everything first: no read timeout.
    stream
        .set_read_timeout(None)
        .map_err(|e| peer_err(e.into()))?;
    let remote = match wire::read_reply(&mut &stream).map_err(peer_err)? {
        Reply::Done(s) => s,
        Reply::Failed(message) => return Err(SendError::ReceiverFailed { peer, message }),
    };
    for line in m.lines(remote.owners) {
        tracing::debug!(%line, "manifest");
    }
    let outcome = SendOutcome {
        local: m.summary(remote.owners),
        remote,
    };
    let ack = if outcome.verified() {
        Ack::Verified
    } else {
        Ack::Mismatch
    };
    if let Err(e) = wire::write_ack(&mut &stream, ack) {
        tracing::warn!(%peer, error = %crate::error_chain(&e), "could not tell the receiver the verdict");
    }
    Ok(outcome)
}

/// A directory's or file's attributes from its metadata.
fn attrs(meta: &Metadata) -> Attrs {
    Attrs {
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        mtime: Mtime {
            secs: meta.mtime(),
            nanos: u32::try_from(meta.mtime_nsec()).unwrap_or(0),
        },
    }
}

/// Where sending a file's content failed.
enum ContentError {
    Read(PathBuf, io::Error),
    Changed(PathBuf, u64),
    Write(io::Error),
}

impl ContentError {
    fn into_send(self, stream: &TcpStream, peer: SocketAddr) -> SendError {
        match self {
            Self::Read(path, source) => SendError::Read { path, source },
            Self::Changed(path, size) => SendError::Changed { path, size },
            Self::Write(e) => receiver_failure(stream, peer, e.into()),
        }
    }
}

/// Sends exactly `size` bytes of `file` (it must hold no more) and returns their sha256.
fn send_content(
    file: &mut impl Read,
    w: &mut impl Write,
    size: u64,
    path: &std::path::Path,
    buf: &mut [u8],
) -> Result<[u8; 32], ContentError> {
    let mut h = Sha256::new();
    let mut sent = 0u64;
    loop {
        let n = match file.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ContentError::Read(path.to_owned(), e)),
        };
        if n == 0 {
            break;
        }
        if sent + n as u64 > size {
            return Err(ContentError::Changed(path.to_owned(), size));
        }
        h.update(&buf[..n]);
        w.write_all(&buf[..n]).map_err(ContentError::Write)?;
        sent += n as u64;
    }
    if sent != size {
        return Err(ContentError::Changed(path.to_owned(), size));
    }
    Ok(h.finalize().into())
}

/// A failed write: the receiver's own reason when it sent one before closing, else `source`.
fn receiver_failure(stream: &TcpStream, peer: SocketAddr, source: WireError) -> SendError {
    if let Err(e) = stream.set_read_timeout(Some(Duration::from_secs(5))) {
        // Without the bound the read below may wait for the peer's close: still an answer.
        tracing::debug!(%peer, error = %e, "no read timeout for the receiver's reason");
    }
    match wire::read_reply(&mut &*stream) {
        Ok(Reply::Failed(message)) => SendError::ReceiverFailed { peer, message },
        _ => SendError::Peer { peer, source },
    }
}

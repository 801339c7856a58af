//! `liqo-mover receive`: checks its directory is empty (but for `lost+found`), listens, refuses
//! every connection that does not present the token (a warning naming the peer, then the next
//! connection), receives the one that does ([`crate::apply`]), re-reads what it wrote for the
//! manifest ([`crate::manifest::scan`]), answers with its summary and waits briefly for the
//! sender's verdict. One transfer, then it returns; nothing done after the timeout.

use std::{
    io::{self, BufReader, Read},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use crate::{
    apply::{self, ApplyError},
    manifest::{self, ManifestError, Summary},
    paths::escape,
    token::Token,
    tree::LOST_FOUND,
    wire::{self, Ack, Reply, WireError},
};

/// How long a connection has to present its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the sender has to answer the manifest.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// What `receive` is told.
#[derive(Clone, Debug)]
pub struct ReceiveOptions {
    /// The directory to fill (empty but for `lost+found`).
    pub dir: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// How long, from the start, the whole transfer may take.
    pub timeout: Duration,
    /// Keep the receiver's own owner instead of the sender's (and leave owners out of the
    /// manifest).
    pub no_owner: bool,
}

/// What a successful receive did.
#[derive(Clone, Copy, Debug)]
pub struct ReceiveOutcome {
    /// The manifest of what is on disk.
    pub summary: Summary,
    /// The sender's verdict (`None`: it gave none in time).
    pub ack: Option<Ack>,
    /// The connections refused before the sender's.
    pub refusals: u64,
}

/// Why receiving failed.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// The directory could not be read.
    #[error("reading the directory {dir}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The directory holds something.
    #[error("the directory {dir} is not empty: it holds {entries}")]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
        /// Its first entries.
        entries: String,
    },
    /// Listening failed.
    #[error("listening on {addr}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// No sender completed before the timeout.
    #[error("no sender completed the transfer within {secs} s ({refusals} connections refused)")]
    Timeout {
        /// The timeout.
        secs: u64,
        /// The connections refused.
        refusals: u64,
    },
    /// Receiving from the authenticated sender failed.
    #[error("receiving from {peer} into {dir}")]
    Apply {
        /// The sender.
        peer: SocketAddr,
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: ApplyError,
    },
    /// Re-reading the written tree failed.
    #[error("re-reading {dir} for its manifest")]
    Scan {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: ManifestError,
    },
    /// Answering the sender failed.
    #[error("sending the manifest to {peer}")]
    Reply {
        /// The sender.
        peer: SocketAddr,
        /// Why.
        #[source]
        source: WireError,
    },
}

impl ReceiveError {
    /// Whether the timeout ended it.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Apply { source, .. } => matches!(
                source,
                ApplyError::Wire(WireError::Io(e)) if e.kind() == io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }
}

/// Receives one tree into `opts.dir` from the first connection presenting `token`.
pub fn receive(opts: &ReceiveOptions, token: &Token) -> Result<ReceiveOutcome, ReceiveError> {
    let deadline = Instant::now() + opts.timeout;
    check_empty(&opts.dir)?;
    let listen_err = |source| ReceiveError::Listen {
        addr: opts.listen,
        source,
    };
    let listener = TcpListener::bind(opts.listen).map_err(listen_err)?;
    listener.set_nonblocking(true).map_err(listen_err)?;
    let local = listener.local_addr().map_err(listen_err)?;
    tracing::info!(listen = %local, dir = %opts.dir.display(), "waiting for the sender");
    let mut refusals = 0;
    loop {
        if Instant::now() >= deadline {
            return Err(ReceiveError::Timeout {
                secs: opts.timeout.as_secs(),
                refusals,
            });
        }
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if let Err(why) = authenticate(&stream, token) {
            refusals += 1;
            tracing::warn!(%peer, refusals, reason = why, "refused a connection; still listening");
            continue;
        }
        tracing::info!(%peer, "the sender presented the token; receiving");
        let (summary, ack) = serve(&stream, peer, opts, deadline)?;
        return Ok(ReceiveOutcome {
            summary,
            ack,
            refusals,
        });
    }
}

/// Refuses a directory holding anything but `lost+found`.
fn check_empty(dir: &Path) -> Result<(), ReceiveError> {
    let dir_err = |source| ReceiveError::Dir {
        dir: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(dir_err)? {
        let entry = entry.map_err(dir_err)?;
        if entry.file_name() == LOST_FOUND && entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        names.push(escape(std::os::unix::ffi::OsStrExt::as_bytes(
            entry.file_name().as_os_str(),
        )));
    }
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    let mut entries = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        entries.push_str(&format!(" and {} more", names.len() - 5));
    }
    Err(ReceiveError::NotEmpty {
        dir: dir.to_owned(),
        entries,
    })
}

/// Reads the hello and answers it; `Err`: why the connection is refused (never the token).
fn authenticate(stream: &TcpStream, token: &Token) -> Result<(), String> {
    let io_err = |e: io::Error| format!("setting up the connection: {e}");
    stream.set_nonblocking(false).map_err(io_err)?;
    stream
        .set_read_timeout(Some(HELLO_TIMEOUT))
        .map_err(io_err)?;
    stream
        .set_write_timeout(Some(HELLO_TIMEOUT))
        .map_err(io_err)?;
    let presented = match wire::read_hello(&mut &*stream) {
        Ok(p) => p,
        Err(WireError::BadMagic) => return Err("not a liqo-mover sender (no magic)".into()),
        Err(e) => return Err(format!("no hello: {}", crate::error_chain(&e))),
    };
    let ok = token.matches(&presented);
    // Best effort: the refused peer learns why, the accepted one must.
    let answered = wire::write_status(&mut &*stream, ok);
    if !ok {
        return Err("a wrong token".into());
    }
    answered.map_err(|e| format!("answering its hello: {}", crate::error_chain(&e)))
}

/// Receives the tree, re-reads it, answers with the summary and reads the verdict.
fn serve(
    stream: &TcpStream,
    peer: SocketAddr,
    opts: &ReceiveOptions,
    deadline: Instant,
) -> Result<(Summary, Option<Ack>), ReceiveError> {
    let owners = !opts.no_owner;
    let mut reader = BufReader::with_capacity(256 * 1024, Deadline { stream, deadline });
    let failed = |message: String| {
        // Best effort: the sender names the cause too, when it can still read it; the
        // receiver's own error is reported by its caller either way.
        if let Err(e) = stream.set_write_timeout(Some(Duration::from_secs(5))) {
            tracing::debug!(error = %e, "no write timeout for the failure reply");
        }
        if let Err(e) = wire::write_reply(&mut &*stream, &Reply::Failed(message)) {
            tracing::warn!(error = %e, "the sender was not told why the copy failed");
        }
    };
    let applied = apply::apply(&mut reader, &opts.dir, owners).map_err(|source| {
        failed(crate::error_chain(&source));
        ReceiveError::Apply {
            peer,
            dir: opts.dir.clone(),
            source,
        }
    })?;
    tracing::info!(
        entries = applied.entries,
        bytes = applied.bytes,
        "written and synced; re-reading it for the manifest"
    );
    let m = manifest::scan(&opts.dir).map_err(|source| {
        failed(crate::error_chain(&source));
        ReceiveError::Scan {
            dir: opts.dir.clone(),
            source,
        }
    })?;
    for line in m.lines(owners) {
        tracing::debug!(%line, "manifest");
    }
    let summary = m.summary(owners);
    let reply_err = |source| ReceiveError::Reply { peer, source };
    stream
        .set_write_timeout(Some(ACK_TIMEOUT))
        .map_err(|e| reply_err(e.into()))?;
    wire::write_reply(&mut &*stream, &Reply::Done(summary)).map_err(reply_err)?;
    let ack = stream
        .set_read_timeout(Some(ACK_TIMEOUT))
        .map_err(WireError::from)
        .and_then(|()| wire::read_ack(&mut &*stream));
    match ack {
        Ok(ack) => Ok((summary, Some(ack))),
        Err(e) => {
            tracing::warn!(%peer, error = %crate::error_chain(&e), "no verdict from the sender");
            Ok((summary, None))
        }
    }
}

/// The stream, its reads failing with `TimedOut` once the deadline passed.
struct Deadline<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "the receive timeout passed");
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        self.stream.set_read_timeout(Some(left))?;
        match (&mut &*self.stream).read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(timed_out()),
            r => r,
        }
    }
}

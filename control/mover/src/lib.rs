//! `liqo-mover`: copies the contents of one volume directory to another over TCP, then proves
//! the copy. `liqoctl move volume` runs it in two Jobs joined by a ClusterIP Service: `receive`
//! on the target node, mounting the new, empty volume, and `send`, mounting the original one.
//!
//! # Protocol
//!
//! Every integer big-endian, every length explicit ([`wire`]):
//!
//! 1. The sender connects and writes the magic `LIQOMOV1`, a u16 token length and the token
//!    (from the environment variable `LIQO_MOVER_TOKEN` on both sides, at least 32
//!    characters). The receiver compares it in constant time and answers one status byte (1
//!    accepted, 0 refused). A refused connection (wrong token, no magic, no hello within 10 s)
//!    is logged with its peer address, never the token, and closed; the receiver keeps
//!    listening (one transfer at a time).
//! 2. The sender writes the entries, each a tag byte and its fields; a path is a u16 length and
//!    that many bytes, relative, validated on decoding ([`paths::RelPath`]: not absolute, not
//!    empty, no `.`, `..` or empty component). `mode` is the u32 `st_mode & 0o7777`, `uid`
//!    and `gid` u32, `mtime` an i64 of seconds since the epoch and a u32 of nanoseconds:
//!    - `R` the root directory: mode, uid, gid, mtime (first, once);
//!    - `D` a directory: path, mode, uid, gid, mtime (before anything in it);
//!    - `F` a regular file: path, mode, uid, gid, mtime, u64 size, then exactly size bytes;
//!    - `L` a symbolic link: path, target (u16 length, bytes), uid, gid;
//!    - `E` the end.
//!
//!    The order is the walk's ([`tree`]): depth first, each directory's names sorted by their
//!    bytes, symbolic links never followed, `lost+found` under the root left out; a fifo,
//!    socket or device is an error naming it (checked before connecting).
//! 3. The receiver, having written and synced everything, re-reads its directory from disk for
//!    its [`manifest`] and answers `K`: the manifest's sha256 (32 bytes), then u64 files,
//!    dirs, symlinks and bytes, and one byte: 1 when owners were kept (0 with `--no-owner`:
//!    both sides then leave uid and gid out of the manifest). Or `X`, a u16 length and its
//!    error message, when it failed (its connection then closes).
//! 4. The sender compares that with the manifest of what it read and answers one byte: 1
//!    verified, 2 mismatch.
//!
//! Both sides print `manifest sha256=<64 hex> files=<n> dirs=<n> symlinks=<n> bytes=<n>` on
//! stdout (and into `/dev/termination-log` when it exists); the sender then `verified`, or, on a
//! mismatch, both digests and exit status [`EXIT_MISMATCH`].
//!
//! # Never
//!
//! It never writes into a receive directory holding anything but `lost+found`, never creates
//! over an existing name nor through a symbolic link ([`apply`]), never follows a symbolic link
//! on either side, never prints or logs the token. It copies no extended attributes, ACLs or
//! sockets, fifos and devices; hard links arrive as separate files, sparse files dense;
//! symbolic links keep their target and owner, not their modification time.

use std::{error::Error, io::Write, path::Path};

pub mod apply;
pub mod manifest;
pub mod paths;
pub mod receive;
pub mod send;
pub mod token;
pub mod tree;
pub mod wire;

pub use token::{TOKEN_ENV, Token};

/// The exit status when the receiver's manifest differs from the sender's.
pub const EXIT_MISMATCH: u8 = 3;
/// The exit status when the receiver's timeout passed.
pub const EXIT_TIMEOUT: u8 = 4;
/// Where Kubernetes reads a container's termination message.
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// `e` and its sources, `: `-separated.
pub fn error_chain(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// Writes `text` into the termination log at `path` when that file exists; a failure is
/// logged with its reason.
pub fn write_termination_log(path: &Path, text: &str) {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the termination log");
            return;
        }
        Ok(_) => {}
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "writing the termination log failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_log_only_when_it_exists() {
        let t = tempfile::tempdir().unwrap();
        let absent = t.path().join("absent");
        write_termination_log(&absent, "x\n");
        assert!(!absent.exists());
        let log = t.path().join("log");
        std::fs::write(&log, "old old old\n").unwrap();
        write_termination_log(&log, "new\n");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "new\n");
    }
}

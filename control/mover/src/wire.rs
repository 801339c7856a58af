//! The framing (see the crate's doc for the protocol): pure encoding and decoding over any
//! [`Read`]/[`Write`], every length explicit, integers big-endian. Decoding validates what it
//! reads: a path through [`RelPath::new`], a mode, nanoseconds, a length against its cap; a
//! file's content is not framed here (the caller copies exactly `size` bytes after the header).
//! The handshake and the answers around the entries are in `wire/session.rs`; the error and the
//! primitives both are made of (integers, length-prefixed bytes) in `wire/frame.rs`.

use std::{
    io::{self, Read, Write},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use crate::paths::{MAX_PATH, RelPath};

mod frame;
mod session;

pub use frame::WireError;
use frame::{get_bytes16, get_u8, get_u32, get_u64, put_bytes16};
pub use session::{
    Ack, MAGIC, MAX_TOKEN, Reply, read_ack, read_hello, read_reply, read_status, write_ack,
    write_hello, write_reply, write_status,
};

const TAG_ROOT: u8 = b'R';
const TAG_DIR: u8 = b'D';
const TAG_FILE: u8 = b'F';
const TAG_SYMLINK: u8 = b'L';
const TAG_END: u8 = b'E';

/// A modification time: seconds since the epoch (negative before it) and nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mtime {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    pub secs: i64,
    /// Nanoseconds, below 10^9.
    pub nanos: u32,
}

impl Mtime {
    /// From a file's time.
    pub fn from_system(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Self {
                secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nanos: d.subsec_nanos(),
            },
            Err(e) => {
                // Before the epoch: floor to whole seconds, nanoseconds forward from there.
                let d = e.duration();
                let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                match d.subsec_nanos() {
                    0 => Self {
                        secs: -secs,
                        nanos: 0,
                    },
                    n => Self {
                        secs: -secs - 1,
                        nanos: 1_000_000_000 - n,
                    },
                }
            }
        }
    }

    /// As a file's time.
    pub fn to_system(self) -> SystemTime {
        let base = if self.secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(self.secs.unsigned_abs())
        } else {
            UNIX_EPOCH - Duration::from_secs(self.secs.unsigned_abs())
        };
        base + Duration::from_nanos(u64::from(self.nanos))
    }
}

/// A directory's or file's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    /// The permission bits with set-user-ID, set-group-ID and sticky (`mode & 0o7777`).
    pub mode: u32,
    /// The owner.
    pub uid: u32,
    /// The group.
    pub gid: u32,
    /// The modification time.
    pub mtime: Mtime,
}

/// One frame of the sender's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The copied directory itself (first, exactly once).
    Root(Attrs),
    /// A directory, before anything in it.
    Dir {
        /// Where.
        path: RelPath,
        /// Its attributes.
        attrs: Attrs,
    },
    /// A regular file; exactly `size` bytes of content follow the header.
    File {
        /// Where.
        path: RelPath,
        /// Its attributes.
        attrs: Attrs,
        /// Its length.
        size: u64,
    },
    /// A symbolic link (never followed; its target may point anywhere).
    Symlink {
        /// Where.
        path: RelPath,
        /// What it points to, verbatim.
        target: Vec<u8>,
        /// The owner.
        uid: u32,
        /// The group.
        gid: u32,
    },
    /// No more entries.
    End,
}

/// Writes an entry's frame (for a file, its header: the content is the caller's to write).
pub fn write_entry(w: &mut impl Write, entry: &Entry) -> Result<(), WireError> {
    match entry {
        Entry::Root(attrs) => {
            w.write_all(&[TAG_ROOT])?;
            put_attrs(w, attrs)?;
        }
        Entry::Dir { path, attrs } => {
            w.write_all(&[TAG_DIR])?;
            put_bytes16(w, "path", path.as_bytes(), MAX_PATH)?;
            put_attrs(w, attrs)?;
        }
        Entry::File { path, attrs, size } => {
            w.write_all(&[TAG_FILE])?;
            put_bytes16(w, "path", path.as_bytes(), MAX_PATH)?;
            put_attrs(w, attrs)?;
            w.write_all(&size.to_be_bytes())?;
        }
        Entry::Symlink {
            path,
            target,
            uid,
            gid,
        } => {
            w.write_all(&[TAG_SYMLINK])?;
            put_bytes16(w, "path", path.as_bytes(), MAX_PATH)?;
            put_bytes16(w, "symbolic link target", target, MAX_PATH)?;
            w.write_all(&uid.to_be_bytes())?;
            w.write_all(&gid.to_be_bytes())?;
        }
        Entry::End => w.write_all(&[TAG_END])?,
    }
    Ok(())
}

/// Reads an entry's frame (for a file, its header), its path validated.
pub fn read_entry(r: &mut impl Read) -> Result<Entry, WireError> {
    let path = |r: &mut _| RelPath::new(get_bytes16(r, "path", MAX_PATH)?).map_err(WireError::Path);
    Ok(match get_u8(r)? {
        TAG_ROOT => Entry::Root(get_attrs(r)?),
        TAG_DIR => Entry::Dir {
            path: path(r)?,
            attrs: get_attrs(r)?,
        },
        TAG_FILE => Entry::File {
            path: path(r)?,
            attrs: get_attrs(r)?,
            size: get_u64(r)?,
        },
        TAG_SYMLINK => {
            let path = path(r)?;
            let target = get_bytes16(r, "symbolic link target", MAX_PATH)?;
            if target.contains(&0) {
                return Err(WireError::TargetNul(path));
            }
            Entry::Symlink {
                path,
                target,
                uid: get_u32(r)?,
                gid: get_u32(r)?,
            }
        }
        TAG_END => Entry::End,
        tag => return Err(WireError::UnknownTag { what: "entry", tag }),
    })
}

fn put_attrs(w: &mut impl Write, a: &Attrs) -> io::Result<()> {
    for n in [a.mode, a.uid, a.gid] {
        w.write_all(&n.to_be_bytes())?;
    }
    w.write_all(&a.mtime.secs.to_be_bytes())?;
    w.write_all(&a.mtime.nanos.to_be_bytes())
}

fn get_attrs(r: &mut impl Read) -> Result<Attrs, WireError> {
    let mode = get_u32(r)?;
    if mode > 0o7777 {
        return Err(WireError::BadValue {
            what: "mode",
            value: mode.into(),
        });
    }
    let (uid, gid) = (get_u32(r)?, get_u32(r)?);
    let mut secs = [0; 8];
    r.read_exact(&mut secs)?;
    let nanos = get_u32(r)?;
    if nanos >= 1_000_000_000 {
        return Err(WireError::BadValue {
            what: "nanoseconds field",
            value: nanos.into(),
        });
    }
    Ok(Attrs {
        mode,
        uid,
        gid,
        mtime: Mtime {
            secs: i64::from_be_bytes(secs),
            nanos,
        },
    })
}

#[cfg(test)]
mod tests;

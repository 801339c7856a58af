//! The primitives every frame is made of, shared by the entries (`wire.rs`) and the frames
//! around them (`wire/session.rs`): the framing's error, integers (big-endian) and
//! length-prefixed byte strings (a u16 length, checked against its cap on both sides).

use std::io::{self, Read, Write};

use crate::paths::{PathError, RelPath};

/// What the framing refused, or the stream's failure.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Reading or writing the stream failed (or it ended early).
    #[error("the stream failed")]
    Io(#[from] io::Error),
    /// The first bytes are not [`MAGIC`](super::MAGIC).
    #[error("not a liqo-mover sender (no LIQOMOV1 magic)")]
    BadMagic,
    /// An unknown frame tag.
    #[error("an unknown {what} tag 0x{tag:02x}")]
    UnknownTag {
        /// Which frame.
        what: &'static str,
        /// The byte.
        tag: u8,
    },
    /// A length over its cap (or zero where one is needed).
    #[error("a {what} of {len} bytes (1 to {max})")]
    BadLength {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: u64,
        /// The cap.
        max: usize,
    },
    /// A field out of its range.
    #[error("a {what} of {value} is out of range")]
    BadValue {
        /// Which field.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// A refused path.
    #[error("a refused path")]
    Path(#[source] PathError),
    /// A symbolic link's target with a NUL byte.
    #[error("the symbolic link {0} has a target with a NUL byte")]
    TargetNul(RelPath),
}

/// A u16 length, then the bytes (1 to `max` of them).
pub(super) fn put_bytes16(
    w: &mut impl Write,
    what: &'static str,
    bytes: &[u8],
    max: usize,
) -> Result<(), WireError> {
    let len = u16::try_from(bytes.len())
        .ok()
        .filter(|&l| l > 0 && usize::from(l) <= max)
        .ok_or(WireError::BadLength {
            what,
            len: bytes.len() as u64,
            max,
        })?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(bytes)?;
    Ok(())
}

pub(super) fn get_bytes16(
    r: &mut impl Read,
    what: &'static str,
    max: usize,
) -> Result<Vec<u8>, WireError> {
    let mut len = [0; 2];
    r.read_exact(&mut len)?;
    let len = usize::from(u16::from_be_bytes(len));
    if len == 0 || len > max {
        return Err(WireError::BadLength {
            what,
            len: len as u64,
            max,
        });
    }
    let mut bytes = vec![0; len];
    r.read_exact(&mut bytes)?;
    Ok(bytes)
}

pub(super) fn get_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

pub(super) fn get_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

pub(super) fn get_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

//! The frames around the entries: the sender's hello (magic, token) and the receiver's status
//! byte, the receiver's reply after the last entry (its manifest's summary, or its failure)
//! and the sender's verdict; with their constants (the magic, the token's and the failure
//! message's caps, the reply tags).

use std::io::{Read, Write};

use super::frame::{WireError, get_bytes16, get_u8, get_u64, put_bytes16};
use crate::manifest::Summary;

/// The first bytes a sender writes.
pub const MAGIC: [u8; 8] = *b"LIQOMOV1";
/// The longest token accepted on the wire.
pub const MAX_TOKEN: usize = 1024;
/// The longest failure message in a reply.
pub(super) const MAX_MESSAGE: usize = 4096;

const REPLY_DONE: u8 = b'K';
const REPLY_FAILED: u8 = b'X';

/// The receiver's answer after [`super::Entry::End`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Everything written, synced and re-read: the manifest of what is on its disk.
    Done(Summary),
    /// The receiver failed; why (its log has more).
    Failed(String),
}

/// The sender's last word: whether the two manifests are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// Equal.
    Verified,
    /// Different.
    Mismatch,
}

/// Writes the magic and the token.
pub fn write_hello(w: &mut impl Write, token: &[u8]) -> Result<(), WireError> {
    w.write_all(&MAGIC)?;
    put_bytes16(w, "token", token, MAX_TOKEN)?;
    Ok(())
}

/// Reads the magic and the token the peer presented.
pub fn read_hello(r: &mut impl Read) -> Result<Vec<u8>, WireError> {
    let mut magic = [0; 8];
    r.read_exact(&mut magic)?;
    if magic != MAGIC {
        return Err(WireError::BadMagic);
    }
    get_bytes16(r, "token", MAX_TOKEN)
}

/// Writes the receiver's answer to the hello: accepted or refused.
pub fn write_status(w: &mut impl Write, accepted: bool) -> Result<(), WireError> {
    w.write_all(&[u8::from(accepted)])?;
    Ok(())
}

/// Reads the receiver's answer to the hello.
pub fn read_status(r: &mut impl Read) -> Result<bool, WireError> {
    match get_u8(r)? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(WireError::BadValue {
            what: "status",
            value: b.into(),
        }),
    }
}

/// Writes the receiver's answer after the last entry.
pub fn write_reply(w: &mut impl Write, reply: &Reply) -> Result<(), WireError> {
    match reply {
        Reply::Done(s) => {
            w.write_all(&[REPLY_DONE])?;
            w.write_all(&s.digest)?;
            for n in [s.files, s.dirs, s.symlinks, s.bytes] {
                w.write_all(&n.to_be_bytes())?;
            }
            w.write_all(&[u8::from(s.owners)])?;
        }
        Reply::Failed(message) => {
            w.write_all(&[REPLY_FAILED])?;
            let message = if message.is_empty() {
                "failed"
            } else {
                message
            };
            let mut cut = message.len().min(MAX_MESSAGE);
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            put_bytes16(w, "message", &message.as_bytes()[..cut], MAX_MESSAGE)?;
        }
    }
    Ok(())
}

/// Reads the receiver's answer after the last entry.
pub fn read_reply(r: &mut impl Read) -> Result<Reply, WireError> {
    match get_u8(r)? {
        REPLY_DONE => {
            let mut digest = [0; 32];
            r.read_exact(&mut digest)?;
            Ok(Reply::Done(Summary {
                digest,
                files: get_u64(r)?,
                dirs: get_u64(r)?,
                symlinks: get_u64(r)?,
                bytes: get_u64(r)?,
                owners: match get_u8(r)? {
                    0 => false,
                    1 => true,
                    b => {
                        return Err(WireError::BadValue {
                            what: "owners flag",
                            value: b.into(),
                        });
                    }
                },
            }))
        }
        REPLY_FAILED => {
            let m = get_bytes16(r, "message", MAX_MESSAGE)?;
            Ok(Reply::Failed(String::from_utf8_lossy(&m).into_owned()))
        }
        tag => Err(WireError::UnknownTag { what: "reply", tag }),
    }
}

/// Writes the sender's verdict.
pub fn write_ack(w: &mut impl Write, ack: Ack) -> Result<(), WireError> {
    w.write_all(&[match ack {
        Ack::Verified => 1,
        Ack::Mismatch => 2,
    }])?;
    Ok(())
}

/// Reads the sender's verdict.
pub fn read_ack(r: &mut impl Read) -> Result<Ack, WireError> {
    match get_u8(r)? {
        1 => Ok(Ack::Verified),
        2 => Ok(Ack::Mismatch),
        tag => Err(WireError::UnknownTag { what: "ack", tag }),
    }
}

//! Batched netlink, the pure part: many requests framed into few `sendmsg` buffers (each message
//! with its own sequence number), and the kernel's answers split back into messages and
//! acknowledgements, so that each refusal maps to the request it answers. Tested without root;
//! the socket is [`crate::nlsock`].
//!
//! rtnetlink requests are [`Request`]s ([`frame`]); nftables messages are written with the same
//! [`Writer`] by [`crate::nft`].

use std::io;

use netlink_packet_core::NetlinkMessage;

use crate::request::Request;

/// `NLMSG_ERROR`: an acknowledgement (error 0) or a refusal.
pub(crate) const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub(crate) const NLMSG_DONE: u16 = 3;
/// The dump was interrupted by a change and may be inconsistent.
pub(crate) const NLM_F_DUMP_INTR: u16 = 0x10;
/// The acknowledgement does not echo the request.
const NLM_F_CAPPED: u16 = 0x100;
/// Extended-ack attributes follow the acknowledgement.
const NLM_F_ACK_TLVS: u16 = 0x200;
/// The kernel's error text.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Offset in the request of the attribute it refused.
const NLMSGERR_ATTR_OFFS: u16 = 2;
/// `nlmsghdr`.
pub(crate) const HDR_LEN: usize = 16;
/// Attribute types carry these flags in their top bits.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// A nested attribute.
pub(crate) const NLA_F_NESTED: u16 = 0x8000;

/// An answer that does not parse as netlink.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed netlink answer: {0}")]
pub(crate) struct Malformed(&'static str);

/// One message of a received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msg<'a> {
    /// `nlmsg_type`.
    pub(crate) ty: u16,
    /// `nlmsg_flags`.
    pub(crate) flags: u16,
    /// `nlmsg_seq`.
    pub(crate) seq: u32,
    /// The whole message, header included.
    pub(crate) bytes: &'a [u8],
}

impl Msg<'_> {
    fn payload(&self) -> &[u8] {
        &self.bytes[HDR_LEN..]
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

const fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// The messages of one datagram.
pub(crate) fn messages(datagram: &[u8]) -> Result<Vec<Msg<'_>>, Malformed> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        if rest.len() < HDR_LEN {
            return Err(Malformed("truncated header"));
        }
        let len = u32_at(rest, 0) as usize;
        if len < HDR_LEN || len > rest.len() {
            return Err(Malformed("bad message length"));
        }
        out.push(Msg {
            ty: u16_at(rest, 4),
            flags: u16_at(rest, 6),
            seq: u32_at(rest, 8),
            bytes: &rest[..len],
        });
        rest = &rest[align(len).min(rest.len())..];
    }
    Ok(out)
}

/// The kernel's acknowledgement of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ack {
    /// The request's sequence number.
    pub(crate) seq: u32,
    /// 0 for success, else the (positive) error number.
    pub(crate) errno: i32,
    /// The kernel's explanation, if it gave one.
    pub(crate) message: Option<String>,
    /// Offset in the request of the attribute the kernel refused, if it said.
    pub(crate) offset: Option<u32>,
}

impl Ack {
    /// The error as an [`io::Error`] carrying the OS error number.
    pub(crate) fn io_error(&self) -> io::Error {
        io::Error::from_raw_os_error(self.errno)
    }
}

/// Attributes `(type, value)` of `b`, stopping at the first malformed one.
pub(crate) fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let (len, ty) = (u16_at(b, 0) as usize, u16_at(b, 2) & NLA_TYPE_MASK);
        if len < 4 || len > b.len() {
            return None;
        }
        let value = &b[4..len];
        b = &b[align(len).min(b.len())..];
        Some((ty, value))
    })
}

/// Parses an `NLMSG_ERROR` message.
pub(crate) fn ack(m: &Msg<'_>) -> Result<Ack, Malformed> {
    let p = m.payload();
    if p.len() < 4 + HDR_LEN {
        return Err(Malformed("truncated acknowledgement"));
    }
    let error = u32_at(p, 0).cast_signed();
    let mut ack = Ack {
        seq: m.seq,
        errno: error.saturating_neg(),
        message: None,
        offset: None,
    };
    if m.flags & NLM_F_ACK_TLVS != 0 {
        let echoed = if m.flags & NLM_F_CAPPED != 0 {
            0
        } else {
            align((u32_at(p, 4) as usize).saturating_sub(HDR_LEN))
        };
        let tlvs = p.get(4 + HDR_LEN + echoed..).unwrap_or_default();
        for (ty, v) in attributes(tlvs) {
            match ty {
                NLMSGERR_ATTR_MSG => {
                    let text = v.split(|b| *b == 0).next().unwrap_or_default();
                    ack.message = Some(String::from_utf8_lossy(text).into_owned());
                }
                NLMSGERR_ATTR_OFFS if v.len() >= 4 => ack.offset = Some(u32_at(v, 0)),
                _ => {}
            }
        }
    }
    Ok(ack)
}

/// The error number an `NLMSG_DONE` carries (0: the dump is complete).
pub(crate) fn done_errno(m: &Msg<'_>) -> Result<i32, Malformed> {
    match m.payload() {
        [] => Ok(0),
        p if p.len() >= 4 => Ok(u32_at(p, 0).cast_signed().saturating_neg()),
        _ => Err(Malformed("truncated end of dump")),
    }
}

/// Writes netlink messages and attributes (host byte order, 4-byte aligned).
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// The bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Starts a message; returns its start, for [`Writer::end`] and attribute offsets.
    pub(crate) fn begin(&mut self, ty: u16, flags: u16, seq: u32) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        start
    }

    /// Raw bytes (a fixed header such as `nfgenmsg`), padded.
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.pad();
    }

    fn pad(&mut self) {
        self.buf.resize(align(self.buf.len()), 0);
    }

    fn set_len(&mut self, start: usize, len: usize, width16: bool) {
        if width16 {
            let len = u16::try_from(len).unwrap_or(u16::MAX);
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        } else {
            let len = u32::try_from(len).unwrap_or(u32::MAX);
            self.buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
        }
    }

    /// Ends the message started at `start`.
    pub(crate) fn end(&mut self, start: usize) {
        let len = self.buf.len() - start;
        self.set_len(start, len, false);
    }

    /// An attribute with a value.
    pub(crate) fn attr(&mut self, ty: u16, value: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.set_len(start, 4 + value.len(), true);
        self.pad();
    }

    /// A NUL-terminated string attribute.
    pub(crate) fn attr_str(&mut self, ty: u16, s: &str) {
        let mut v = Vec::with_capacity(s.len() + 1);
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.attr(ty, &v);
    }

    /// Starts a nested attribute; returns its start, for [`Writer::nest_end`].
    pub(crate) fn nest(&mut self, ty: u16) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf
            .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        start
    }

    /// Ends the nested attribute started at `start`; `false` if it outgrew the 64 KiB an
    /// attribute can hold.
    pub(crate) fn nest_end(&mut self, start: usize) -> bool {
        let len = self.buf.len() - start;
        self.set_len(start, len, true);
        len <= usize::from(u16::MAX)
    }

    /// The bytes.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Requests framed for sending: one `sendmsg` each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// The messages.
    pub(crate) bytes: Vec<u8>,
    /// Index (in the framed requests) of the first one.
    pub(crate) start: usize,
    /// How many.
    pub(crate) count: usize,
}

/// Frames `reqs` with sequence numbers `first_seq`, `first_seq + 1`, ... into chunks of at most
/// `max_msgs` messages and about `max_bytes` bytes (a larger single message is alone).
pub(crate) fn frame(
    reqs: &[Request],
    first_seq: u32,
    max_msgs: usize,
    max_bytes: usize,
) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut cur = Chunk {
        bytes: Vec::new(),
        start: 0,
        count: 0,
    };
    for (i, req) in reqs.iter().enumerate() {
        let mut msg = NetlinkMessage::from(req.message.clone());
        msg.header.flags = req.mode.flags();
        msg.header.sequence_number = seq_of(first_seq, i);
        msg.finalize();
        let len = msg.buffer_len();
        if cur.count > 0 && (cur.count >= max_msgs || cur.bytes.len() + len > max_bytes) {
            let next = Chunk {
                bytes: Vec::new(),
                start: i,
                count: 0,
            };
            chunks.push(std::mem::replace(&mut cur, next));
        }
        let at = cur.bytes.len();
        cur.bytes.resize(at + align(len), 0);
        msg.serialize(&mut cur.bytes[at..at + len]);
        cur.count += 1;
    }
    if cur.count > 0 {
        chunks.push(cur);
    }
    chunks
}

/// The sequence number of the `i`-th message of a batch starting at `first`.
pub(crate) fn seq_of(first: u32, i: usize) -> u32 {
    first.wrapping_add(u32::try_from(i).unwrap_or(u32::MAX))
}

/// The earliest refused message among `count` starting at `first_seq`: its index and the ack.
pub(crate) fn first_refusal(acks: &[Ack], first_seq: u32, count: usize) -> Option<(usize, &Ack)> {
    first_refusal_but(acks, first_seq, count, |_, _| false)
}

/// [`first_refusal`], leaving out the refusals `fine(index, ack)` accepts.
pub(crate) fn first_refusal_but(
    acks: &[Ack],
    first_seq: u32,
    count: usize,
    fine: impl Fn(usize, &Ack) -> bool,
) -> Option<(usize, &Ack)> {
    acks.iter()
        .filter(|a| a.errno != 0)
        .map(|a| (a.seq.wrapping_sub(first_seq) as usize, a))
        .filter(|(i, a)| *i < count && !fine(*i, a))
        .min_by_key(|(i, _)| *i)
}

#[cfg(test)]
mod tests;

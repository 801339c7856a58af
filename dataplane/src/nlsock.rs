//! The one blocking netlink socket that batches and dumps go through, for rtnetlink
//! ([`crate::netlink`]) and nfnetlink ([`crate::nft`]) alike. Framing and parsing are pure
//! ([`crate::batch`]); this module only opens the socket, sends and receives.
//!
//! A socket lives in the namespace it was opened in: [`Socket::open_in`] opens it on a thread
//! that entered the namespace, so the caller's threads never move.
//!
//! Every message of a batch carries its own sequence number and (normally) `NLM_F_ACK`. The
//! kernel handles a `sendmsg` to rtnetlink or nfnetlink synchronously, queueing one
//! acknowledgement per message on this socket before `sendmsg` returns; if they do not fit the
//! receive buffer they are dropped. So the receive buffer is enlarged (`SO_RCVBUFFORCE`, else
//! `SO_RCVBUF` up to `rmem_max`) and callers send at most [`Socket::ack_room`] messages per
//! `sendmsg`. Acknowledgements are capped (`NETLINK_CAP_ACK`: the request is not echoed back)
//! and extended (`NETLINK_EXT_ACK`: the kernel's error text and the offset of the bad
//! attribute are kept).

use std::{collections::HashSet, io};

use netlink_sys::{Socket as Fd, SocketAddr};
use nix::sys::{
    socket::{setsockopt, sockopt},
    time::{TimeVal, TimeValLike},
};

use crate::{
    batch::{self, Ack, NLM_F_DUMP_INTR, NLMSG_DONE, NLMSG_ERROR},
    netns::{self, Netns},
};

pub(crate) use netlink_sys::protocols::{NETLINK_NETFILTER, NETLINK_ROUTE};

/// The receive buffer asked for: room for thousands of acknowledgements.
const WANT_RCVBUF: usize = 8 << 20;
/// What one acknowledgement may charge to the receive buffer (its skb's true size). A capped
/// ack is well under 1 KiB of data, the allocation around it counted; an uncapped refusal (a
/// kernel without `NETLINK_CAP_ACK`) echoes a request of at most a few hundred bytes.
const ACK_CHARGE: usize = 2048;
/// Most messages per `sendmsg`, whatever the buffer.
const MAX_MESSAGES: usize = 2048;
/// How long to wait for the kernel's answer before giving up.
const TIMEOUT_SECS: i64 = 10;
/// Receive buffer: the kernel never puts more than 32 KiB in one dump datagram.
const RECV_BUF: usize = 64 << 10;
/// Dumps interrupted by a concurrent change are retried this many times.
const DUMP_TRIES: usize = 4;

/// A message the kernel sent back: its type, flags, sequence number and whole bytes (header
/// included, for [`netlink_packet_core`] to parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// `nlmsg_type`.
    pub(crate) ty: u16,
    /// `nlmsg_seq`.
    pub(crate) seq: u32,
    /// The message, header included.
    pub(crate) bytes: Vec<u8>,
}

/// What the kernel answered to one `sendmsg`: acknowledgements and other messages.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    /// Acknowledgements (success and errors), in arrival order.
    pub(crate) acks: Vec<Ack>,
    /// Other messages (the answer of a `GET` request).
    pub(crate) replies: Vec<Reply>,
}

/// A blocking netlink socket connected to the kernel.
#[derive(Debug)]
pub(crate) struct Socket {
    fd: Fd,
    next_seq: u32,
    ack_room: usize,
    sndbuf: usize,
    buf: Vec<u8>,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl Socket {
    /// Opens a socket of `protocol` in the calling thread's namespace.
    pub(crate) fn open(protocol: isize) -> io::Result<Socket> {
        let mut fd = Fd::new(protocol)?;
        fd.bind_auto()?;
        fd.connect(&SocketAddr::new(0, 0))?;
        // Each option is a refinement an old kernel may lack: without it, errors lose the
        // kernel's text, acknowledgements echo the request (so fewer fit), dumps ignore their
        // filters (callers filter again). Worth a debug line, not a failure.
        let options: [(&str, io::Result<()>); 3] = [
            ("NETLINK_EXT_ACK", fd.set_ext_ack(true)),
            ("NETLINK_CAP_ACK", fd.set_cap_ack(true)),
            (
                "NETLINK_GET_STRICT_CHK",
                if protocol == NETLINK_ROUTE {
                    fd.set_netlink_get_strict_chk(true)
                } else {
                    Ok(())
                },
            ),
        ];
        for (option, set) in options {
            if let Err(e) = set {
                tracing::debug!(option, error = %e, "netlink socket option unavailable");
            }
        }
        if setsockopt(&fd, sockopt::RcvBufForce, &WANT_RCVBUF).is_err() {
            // Without CAP_NET_ADMIN: as much as rmem_max allows; the chunks get smaller.
            setsockopt(&fd, sockopt::RcvBuf, &WANT_RCVBUF).map_err(io::Error::from)?;
        }
        let rcvbuf = fd.get_rx_buf_sz()?;
        let timeout = TimeVal::seconds(TIMEOUT_SECS);
        setsockopt(&fd, sockopt::ReceiveTimeout, &timeout).map_err(io::Error::from)?;
        let sndbuf = nix::sys::socket::getsockopt(&fd, sockopt::SndBuf).map_err(io::Error::from)?;
        Ok(Socket {
            fd,
            next_seq: 1,
            ack_room: (rcvbuf / ACK_CHARGE).clamp(1, MAX_MESSAGES),
            sndbuf,
            buf: Vec::with_capacity(RECV_BUF),
        })
    }

    /// Opens a socket of `protocol` inside `ns` (or the caller's namespace).
    pub(crate) fn open_in(
        ns: Option<&Netns>,
        protocol: isize,
    ) -> Result<io::Result<Socket>, netns::Error> {
        match ns {
            Some(ns) => ns.run(move || Socket::open(protocol)),
            None => Ok(Socket::open(protocol)),
        }
    }

    /// How many acknowledged messages one `sendmsg` may carry.
    pub(crate) fn ack_room(&self) -> usize {
        self.ack_room
    }

    /// Reserves `n` consecutive sequence numbers and returns the first.
    pub(crate) fn reserve(&mut self, n: usize) -> u32 {
        let first = self.next_seq;
        self.next_seq = first.wrapping_add(u32::try_from(n).unwrap_or(u32::MAX));
        first
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        // The kernel refuses a message larger than the send buffer (an nftables transaction
        // must be one message train, so it is not split).
        if bytes.len() + 64 > self.sndbuf {
            let want = bytes.len() + (64 << 10);
            if setsockopt(&self.fd, sockopt::SndBufForce, &want).is_err() {
                setsockopt(&self.fd, sockopt::SndBuf, &want).map_err(io::Error::from)?;
            }
            self.sndbuf =
                nix::sys::socket::getsockopt(&self.fd, sockopt::SndBuf).map_err(io::Error::from)?;
        }
        let sent = self.fd.send(bytes, 0)?;
        if sent != bytes.len() {
            return Err(io::Error::other(format!(
                "sent {sent} of {} bytes",
                bytes.len()
            )));
        }
        Ok(())
    }

    /// One datagram; `wait` blocks (up to the timeout), otherwise `None` when nothing is queued.
    fn recv(&mut self, wait: bool) -> io::Result<Option<&[u8]>> {
        self.buf.clear();
        let flags = libc::MSG_TRUNC | if wait { 0 } else { libc::MSG_DONTWAIT };
        match self.fd.recv(&mut self.buf, flags) {
            Ok(n) if n > self.buf.capacity() => Err(io::Error::other(format!(
                "a {n}-byte netlink datagram does not fit the receive buffer"
            ))),
            Ok(_) => Ok(Some(&self.buf)),
            Err(e) if would_block(&e) && !wait => Ok(None),
            Err(e) if would_block(&e) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer from the kernel within {TIMEOUT_SECS} s"),
            )),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Err(io::Error::new(
                e.kind(),
                "acknowledgements were lost: the receive buffer overflowed",
            )),
            Err(e) => Err(e),
        }
    }

    /// Sends `bytes` (whole messages with sequence numbers in `seqs`) and collects the answers:
    /// it waits until every message of `acked` has its acknowledgement, or until an error
    /// arrives for a message that expects none (an nftables batch refused as a whole); then
    /// takes whatever else is already queued. Answers to other sequence numbers (left over from
    /// an earlier exchange that failed) are ignored.
    pub(crate) fn exchange(
        &mut self,
        bytes: &[u8],
        seqs: &HashSet<u32>,
        acked: &HashSet<u32>,
    ) -> io::Result<Answers> {
        self.send(bytes)?;
        let mut answers = Answers::default();
        let mut waiting = acked.clone();
        let mut refused = false;
        loop {
            let wait = !waiting.is_empty() && !refused;
            let Some(datagram) = self.recv(wait)? else {
                break;
            };
            for m in batch::messages(datagram).map_err(io::Error::other)? {
                if !seqs.contains(&m.seq) {
                    continue;
                }
                if m.ty == NLMSG_ERROR {
                    let ack = batch::ack(&m).map_err(io::Error::other)?;
                    if !waiting.remove(&ack.seq) && ack.errno != 0 {
                        refused = true;
                    }
                    answers.acks.push(ack);
                } else {
                    answers.replies.push(Reply {
                        ty: m.ty,
                        seq: m.seq,
                        bytes: m.bytes.to_vec(),
                    });
                }
            }
        }
        Ok(answers)
    }

    /// A dump: sends the request that `build` makes for a sequence number and returns the
    /// datagrams of the answer, whole (callers take the messages of the type they dumped: a
    /// datagram may end with the `NLMSG_DONE`). A dump interrupted by a concurrent change is
    /// retried.
    pub(crate) fn dump(&mut self, build: impl Fn(u32) -> Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
        for _ in 1..DUMP_TRIES {
            if let Some(datagrams) = self.dump_once(&build)? {
                return Ok(datagrams);
            }
        }
        self.dump_once(&build)?.ok_or_else(|| {
            io::Error::other("the dump kept being interrupted by concurrent changes")
        })
    }

    /// `None` if the dump was interrupted.
    fn dump_once(&mut self, build: &impl Fn(u32) -> Vec<u8>) -> io::Result<Option<Vec<Vec<u8>>>> {
        let seq = self.reserve(1);
        self.send(&build(seq))?;
        let mut out = Vec::new();
        let mut interrupted = false;
        loop {
            let datagram = self.recv(true)?.unwrap_or_default();
            let mut ours = false;
            for m in batch::messages(datagram).map_err(io::Error::other)? {
                if m.seq != seq {
                    continue;
                }
                ours = true;
                interrupted |= m.flags & NLM_F_DUMP_INTR != 0;
                match m.ty {
                    NLMSG_DONE => {
                        let errno = batch::done_errno(&m).map_err(io::Error::other)?;
                        if errno != 0 {
                            return Err(io::Error::from_raw_os_error(errno));
                        }
                        out.push(datagram.to_vec());
                        return Ok((!interrupted).then_some(out));
                    }
                    NLMSG_ERROR => {
                        let ack = batch::ack(&m).map_err(io::Error::other)?;
                        return Err(ack.io_error());
                    }
                    _ => {}
                }
            }
            if ours {
                out.push(datagram.to_vec());
            }
        }
    }
}

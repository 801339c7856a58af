//! What the receive path queues for the handshake thread: one handshake message whose mac1 it
//! checked (a copy, at most the largest handshake message) and where it came from. The queue is
//! bounded ([`QUEUE`](super::tuning::QUEUE)): a full one drops handshakes, never data.

use std::net::SocketAddr;

/// The largest handshake message (an initiation).
const LARGEST: usize = 148;

/// One admitted handshake message and where it came from.
pub(super) struct Handshake {
    buf: [u8; LARGEST],
    len: usize,
    /// Where it came from.
    pub(super) from: SocketAddr,
}

impl Handshake {
    /// A copy of `datagram`, if it fits a handshake message.
    pub(super) fn new(datagram: &[u8], from: SocketAddr) -> Option<Handshake> {
        let mut buf = [0u8; LARGEST];
        buf.get_mut(..datagram.len())?.copy_from_slice(datagram);
        Some(Handshake {
            buf,
            len: datagram.len(),
            from,
        })
    }

    /// The message.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

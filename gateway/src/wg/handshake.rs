//! The handshake thread: key exchanges, off the data path. The receive path admits handshake
//! messages ([`super::guard`]) and queues them here, at most [`QUEUE`] waiting; the data path
//! never waits for a key exchange, and a full queue drops handshakes, not data.

use std::{
    io::Write,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::Ordering,
        mpsc::{Receiver, RecvTimeoutError},
    },
};

use boringtun::noise::{Packet, Tunn, handshake::parse_handshake_anon};

use super::{
    device::{Device, TICK},
    offload::Coalescer,
    peers::{Peer, Table},
    rx::BUF,
};

/// Handshake messages waiting at most (a second of the global rate).
pub(super) const QUEUE: usize = super::guard::GLOBAL_RATE as usize;
/// The largest handshake message (an initiation).
const LARGEST: usize = 148;

/// One admitted handshake message and where it came from.
pub(super) struct Handshake {
    buf: [u8; LARGEST],
    len: usize,
    from: SocketAddr,
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

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Device {
    /// Runs admitted handshakes until stopped.
    pub(super) fn handshake_loop(&self, queue: &Receiver<Handshake>) {
        let mut out = vec![0u8; BUF];
        let mut coalescer = Coalescer::default();
        let mut write = |frame: &[u8]| {
            if let Err(e) = (&self.tun).write(frame) {
                tracing::debug!(error = %e, "writing to the tun device");
            }
        };
        while !self.stopped() {
            let h = match queue.recv_timeout(TICK) {
                Ok(h) => h,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            self.wire
                .handshakes_processed
                .fetch_add(1, Ordering::Relaxed);
            match self.peer_of(&self.table(), h.bytes()) {
                Some(peer) => {
                    self.decapsulate(
                        &peer,
                        h.from,
                        h.bytes(),
                        &mut out,
                        &mut coalescer,
                        &mut write,
                    );
                    coalescer.finish(&mut write);
                }
                None => {
                    self.wire.invalid.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// The peer a handshake message belongs to: the static key an initiation carries (one key
    /// exchange to read it), the receiver index of a response.
    fn peer_of(&self, table: &Table, datagram: &[u8]) -> Option<Arc<Peer>> {
        let p = match Tunn::parse_incoming_packet(datagram).ok()? {
            Packet::HandshakeInit(hi) => {
                let secret = self.key.secret();
                let public = crate::keys::x25519(&self.key.public());
                let half = parse_handshake_anon(&secret, &public, &hi).ok()?;
                table.by_key(&half.peer_static_public)
            }
            Packet::HandshakeResponse(r) => table.by_receiver(r.receiver_idx),
            Packet::PacketCookieReply(c) => table.by_receiver(c.receiver_idx),
            Packet::PacketData(d) => table.by_receiver(d.receiver_idx),
        };
        p.cloned()
    }
}

//! UDP (GRO) -> decrypt -> coalesce -> TUN: the receive half of the data path. Handshake
//! messages only have their mac1 checked here and are queued (bounded) for the handshake thread,
//! which does the rest: no cookie and no key exchange is computed on this thread.

use std::{
    io::{IoSliceMut, Write},
    net::SocketAddr,
    os::fd::AsRawFd,
    sync::atomic::Ordering,
    time::Duration,
};

use boringtun::noise::{Packet, Tunn, TunnResult};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg};

use super::{
    half::{RxState, Step},
    identity::Identity,
    lanes::Lane,
    offload::Coalescer,
    peers::Peer,
    queue::Handshake,
    state::{Device, bump},
};

impl Device {
    /// Receives one batch of datagrams (many with GRO) from `lane`'s socket without waiting, and
    /// handles them (decrypted packets go to the lane's TUN queue).
    pub(super) fn rx_once(&self, lane: &Lane, st: &mut RxState) -> Step {
        let RxState {
            buf,
            out,
            coalescer,
            cmsg,
        } = st;
        let (n, from, seg) = {
            let mut iov = [IoSliceMut::new(buf)];
            match recvmsg::<SockaddrStorage>(
                lane.udp.as_raw_fd(),
                &mut iov,
                Some(cmsg),
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(m) => {
                    let mut seg = None;
                    for c in m.cmsgs().ok().into_iter().flatten() {
                        match c {
                            ControlMessageOwned::UdpGroSegments(s) => {
                                // The kernel never sends a negative size; if it did, reading
                                // the buffer as one datagram is the safe way (and what we do
                                // without GRO).
                                seg = usize::try_from(s).ok();
                            }
                            ControlMessageOwned::ScmTimestampns(t) => {
                                // A timestamp before 1970 cannot be judged: no sign either way.
                                if let (Ok(sec), Ok(nsec)) =
                                    (u64::try_from(t.tv_sec()), u32::try_from(t.tv_nsec()))
                                {
                                    self.affinity.progress.arrived(Duration::new(sec, nsec));
                                }
                            }
                            _ => {}
                        }
                    }
                    let from = m.address.as_ref().and_then(to_socket_addr);
                    (m.bytes, from, seg)
                }
                Err(nix::errno::Errno::EAGAIN) => return Step::Empty,
                Err(nix::errno::Errno::EINTR) => return Step::Worked,
                Err(e) => {
                    tracing::error!(error = %e, "receiving from the UDP socket");
                    return Step::Failed;
                }
            }
        };
        let Some(from) = from else {
            return Step::Worked;
        };
        let table = self.table();
        let mut write = |frame: &[u8]| {
            if let Err(e) = (&lane.tun).write(frame) {
                tracing::debug!(error = %e, "writing to the tun device");
            }
        };
        for datagram in buf[..n].chunks(seg.unwrap_or(n).max(1)) {
            let peer = match Tunn::parse_incoming_packet(datagram) {
                Ok(Packet::HandshakeInit(_) | Packet::HandshakeResponse(_)) => {
                    self.admit(&table.own, from, datagram);
                    continue;
                }
                Ok(Packet::PacketCookieReply(c)) => table.by_receiver(c.receiver_idx),
                Ok(Packet::PacketData(d)) => table.by_receiver(d.receiver_idx),
                Err(_) => None,
            };
            match peer {
                Some(peer) => self.decapsulate(peer, from, datagram, out, coalescer, &mut write),
                None => bump(&self.wire.invalid),
            }
        }
        coalescer.finish(&mut write);
        Step::Worked
    }

    /// Checks a handshake message's mac1 against our key `own` (cheap, and nobody without our
    /// public key gets past it) and queues it for the handshake thread, which decides the rest
    /// (load, mac2, cookie replies, rate limits): no cookie is made and no key exchanged on
    /// this thread.
    fn admit(&self, own: &Identity, from: SocketAddr, datagram: &[u8]) {
        let mut reply = [0u8; 64];
        // `open` never asks for a cookie: this checks mac1 only.
        if own
            .open
            .verify_packet(Some(from.ip()), datagram, &mut reply)
            .is_err()
        {
            bump(&self.wire.invalid);
            return;
        }
        let Some(h) = Handshake::new(datagram, from) else {
            bump(&self.wire.invalid);
            return;
        };
        // Counted before it is queued: the handshake thread may take it at once.
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.handshakes.try_send(h).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            bump(&self.wire.handshakes_overflow);
        }
    }

    /// Hands `datagram` to the peer's session and acts on what it returns. Datagrams that fail
    /// authentication (or replay a counter) count as the peer's `rejected`, not its `dropped`:
    /// anyone who saw its receiver index can send them.
    pub(super) fn decapsulate(
        &self,
        peer: &Peer,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
        coalescer: &mut Coalescer,
        write: &mut impl FnMut(&[u8]),
    ) {
        // Only an initiation (whose sender proved it holds the peer's key... or will fail to)
        // may make the peer's session: anything else naming a peer we never talked to is
        // garbage, and making the session would cost a key exchange per forged datagram.
        let session = if first_byte_is(datagram, 1) {
            peer.tunn.get()
        } else {
            match peer.tunn.started() {
                Some(t) => t,
                None => {
                    bump(&peer.stats.rejected);
                    return;
                }
            }
        };
        // Handshake answers and packets queued while waiting for the session leave once the lock
        // is released: a send that blocks must not hold up the peer's send half.
        let mut replies: Vec<Vec<u8>> = Vec::new();
        // The decrypted packet (where it starts in `out`, and its length), written to the TUN
        // device with the lock released: the application it wakes may preempt this thread
        // (always, in the idle class: `wg::idleclass`), which must not hold the session then.
        let mut deliver: Option<(usize, usize)> = None;
        let mut tunn = session.lock().unwrap_or_else(|p| p.into_inner());
        let mut first = true;
        loop {
            let r = if first {
                tunn.decapsulate(Some(from.ip()), datagram, out)
            } else {
                tunn.decapsulate(None, &[], out)
            };
            first = false;
            match r {
                TunnResult::WriteToNetwork(p) => {
                    // Handshake answers and packets queued while waiting for the session. A
                    // cookie reply (type 3) answers an unverified packet: it proves nothing about
                    // the sender, so it must not move the peer's endpoint.
                    if p.first() != Some(&3) {
                        peer.saw(from);
                    }
                    replies.push(p.to_vec());
                }
                TunnResult::WriteToTunnelV4(p, src) => {
                    peer.saw(from);
                    if peer.allows(src) {
                        peer.stats.rx_packets.fetch_add(1, Ordering::Relaxed);
                        peer.stats
                            .rx_bytes
                            .fetch_add(p.len() as u64, Ordering::Relaxed);
                        deliver = Some((p.as_ptr() as usize, p.len()));
                    } else {
                        tracing::debug!(peer = %peer.cfg.id, %src, "source outside the peer's allowed IPs");
                        bump(&peer.stats.dropped);
                    }
                    break;
                }
                TunnResult::Done => {
                    if first_byte_is(datagram, 4) {
                        peer.saw(from); // an authenticated keepalive
                    }
                    break;
                }
                TunnResult::WriteToTunnelV6(..) => {
                    bump(&peer.stats.dropped);
                    break;
                }
                TunnResult::Err(e) => {
                    tracing::debug!(peer = %peer.cfg.id, %from, error = ?e, "datagram rejected");
                    bump(&peer.stats.rejected);
                    break;
                }
            }
        }
        drop(tunn);
        // Our key switched since this thread took the table: the session is gone, and nothing
        // made with the old key leaves or is delivered.
        if (deliver.is_some() || !replies.is_empty()) && !self.current(peer) {
            replies.clear();
            if deliver.take().is_some() {
                bump(&peer.stats.dropped);
            }
        }
        if let Some((at, len)) = deliver {
            // `decapsulate` returns a part of `out`.
            let start = at.saturating_sub(out.as_ptr() as usize);
            if let Some(packet) = out.get(start..start + len) {
                coalescer.push(packet, write);
            }
        }
        for p in &replies {
            if let Err(e) = self.udp().send_to(p, from) {
                tracing::debug!(peer = %peer.cfg.id, error = %e, "send");
            }
        }
    }
}

fn first_byte_is(datagram: &[u8], t: u8) -> bool {
    datagram.len() >= 4 && datagram[0] == t
}

fn to_socket_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    s.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

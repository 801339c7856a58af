//! The handshake thread: admission and key exchanges, off the data path. The receive path checks
//! a handshake message's mac1 and queues it here ([`Handshake`]), at most
//! [`QUEUE`](super::tuning::QUEUE) waiting; a full queue drops handshakes, not data. Here the
//! [`Guard`] decides (under load: mac2 or a cookie reply, then the per-source and global buckets)
//! before any key exchange.

use std::{
    io::Write,
    net::SocketAddr,
    os::fd::AsRawFd,
    sync::{
        Arc,
        atomic::Ordering,
        mpsc::{Receiver, RecvTimeoutError},
    },
    time::Instant,
};

use boringtun::noise::{Packet, Tunn, TunnResult, handshake::parse_handshake_anon};
use nix::sys::socket::{MsgFlags, SockaddrStorage, sendto};

use super::{
    guard::{Guard, Verdict},
    offload::Coalescer,
    peers::{Peer, Table},
    queue::Handshake,
    state::{Device, bump},
    tuning::{BUF, TICK},
};

/// Nice value of the handshake thread (the data path runs at 0).
const NICE: libc::c_int = 10;

/// Lowers the calling thread's scheduling priority to [`NICE`] (Linux sets it per thread).
#[expect(
    unsafe_code,
    reason = "setpriority and gettid have no safe wrapper in nix"
)]
fn lower_priority() {
    // SAFETY: gettid and setpriority only read their arguments; `who` is this thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, NICE) };
    if r != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "could not lower the handshake thread's priority");
    }
}

impl Device {
    /// Runs queued handshake messages until stopped: admission ([`Guard`]: load, mac2 and a
    /// cookie reply, rate limits), then the key exchange. The thread runs at a lower priority
    /// than the data path, so even a flood that keeps it busy leaves the data threads the CPU.
    pub(super) fn handshake_loop(&self, queue: &Receiver<Handshake>) {
        lower_priority();
        let mut out = vec![0u8; BUF];
        let mut coalescer = Coalescer::default();
        let mut guard = Guard::new(Instant::now());
        let mut write = |frame: &[u8]| {
            if let Err(e) = self.tun().write(frame) {
                tracing::debug!(error = %e, "writing to the tun device");
            }
        };
        while !self.stopped() {
            let h = match queue.recv_timeout(TICK) {
                Ok(h) => h,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let waiting = self
                .queued
                .fetch_sub(1, Ordering::Relaxed)
                .saturating_sub(1);
            let now = Instant::now();
            let under_load = guard.under_load(now, waiting);
            let mut reply = [0u8; 64];
            let mut cookie = None;
            // One table for the message: its key admits, answers and makes the session.
            let table = self.table();
            let verdict = guard.admit(
                h.from.ip(),
                under_load,
                || match table
                    .own
                    .strict
                    .verify_packet(Some(h.from.ip()), h.bytes(), &mut reply)
                {
                    Ok(_) => true,
                    Err(TunnResult::WriteToNetwork(c)) => {
                        cookie = Some(c.len());
                        false
                    }
                    Err(_) => false,
                },
                now,
            );
            match verdict {
                Verdict::Admit => {}
                Verdict::Cookie => {
                    if let Some(len) = cookie {
                        self.send_cookie(&reply[..len], h.from);
                    }
                    continue;
                }
                Verdict::SourceLimited | Verdict::GlobalLimited => {
                    bump(&self.wire.handshakes_limited);
                    continue;
                }
            }
            bump(&self.wire.handshakes_processed);
            match peer_of(&table, h.bytes()) {
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
                None => bump(&self.wire.invalid),
            }
        }
    }

    /// Sends a cookie reply without waiting: one that cannot be sent now is a lost datagram
    /// (the initiator retries), and a full socket must not stall the handshakes behind it.
    fn send_cookie(&self, reply: &[u8], to: SocketAddr) {
        match sendto(
            self.udp().as_raw_fd(),
            reply,
            &SockaddrStorage::from(to),
            MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(_) => bump(&self.wire.cookies_sent),
            Err(e) => tracing::debug!(%to, error = %e, "sending a cookie reply"),
        }
    }
}

/// The peer of `table` a handshake message belongs to: the static key an initiation carries (one
/// key exchange with the table's key to read it), the receiver index of a response.
fn peer_of(table: &Table, datagram: &[u8]) -> Option<Arc<Peer>> {
    let p = match Tunn::parse_incoming_packet(datagram).ok()? {
        Packet::HandshakeInit(hi) => {
            let own = &table.own;
            let half =
                parse_handshake_anon(&own.key.secret(), &crate::keys::x25519(&own.public), &hi)
                    .ok()?;
            table.by_key(&half.peer_static_public)
        }
        Packet::HandshakeResponse(r) => table.by_receiver(r.receiver_idx),
        Packet::PacketCookieReply(c) => table.by_receiver(c.receiver_idx),
        Packet::PacketData(d) => table.by_receiver(d.receiver_idx),
    };
    p.cloned()
}

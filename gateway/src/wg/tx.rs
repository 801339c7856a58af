//! TUN -> segment -> encrypt -> UDP (GSO): the send half of the data path.

use std::{
    io::{self, IoSlice, Read},
    net::{Ipv4Addr, UdpSocket},
    os::fd::AsRawFd,
    sync::atomic::Ordering,
};

use boringtun::noise::TunnResult;
use nix::sys::socket::{ControlMessage, MsgFlags, SockaddrStorage, sendmsg};

use super::{
    batches::{BATCH_BYTES, Batches},
    half::{Step, TxState},
    lanes::Lane,
    offload::{VNET_HDR_LEN, VirtioNetHdr, segment},
    peers::Peer,
    state::Device,
};

impl Device {
    /// Sends one message of `peer`'s session (a handshake message or a keepalive) to its
    /// endpoint; nothing if our key switched since the caller took the table (the session is
    /// gone with the old key).
    pub(super) fn send(&self, peer: &Peer, data: &[u8]) {
        if !self.current(peer) {
            return;
        }
        match peer.endpoint() {
            Some(ep) => {
                if let Err(e) = self.udp().send_to(data, ep) {
                    tracing::debug!(peer = %peer.cfg.id, error = %e, "send");
                    peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends `buf`, the concatenation of encrypted packets all `seg` bytes long but the last
    /// (which may be shorter), to the peer with one UDP GSO `sendmsg`.
    fn send_batch(&self, udp: &UdpSocket, peer: &Peer, buf: &[u8], seg: usize, count: u64) {
        if buf.is_empty() {
            return;
        }
        let Some(ep) = peer.endpoint() else {
            peer.stats.dropped.fetch_add(count, Ordering::Relaxed);
            return;
        };
        let gso = buf.len() > seg && !self.gso_off.load(Ordering::Relaxed);
        let r = if !gso {
            buf.chunks(seg.max(1))
                .try_for_each(|p| udp.send_to(p, ep).map(drop))
        } else {
            let iov = [IoSlice::new(buf)];
            let size = seg as u16;
            let cmsg = [ControlMessage::UdpGsoSegments(&size)];
            let addr = SockaddrStorage::from(ep);
            match sendmsg(udp.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), Some(&addr)) {
                Ok(_) => Ok(()),
                // The kernel refuses segmentation (segments above the path MTU, no checksum
                // offload on the way out): send them one by one from now on.
                Err(nix::errno::Errno::EINVAL | nix::errno::Errno::EIO) => {
                    tracing::warn!(
                        segment = seg,
                        "UDP GSO refused by the kernel; sending packets one by one (is the MTU above the underlay's?)"
                    );
                    self.gso_off.store(true, Ordering::Relaxed);
                    buf.chunks(seg.max(1))
                        .try_for_each(|p| udp.send_to(p, ep).map(drop))
                }
                Err(e) => Err(io::Error::from(e)),
            }
        };
        if let Err(e) = r {
            tracing::debug!(peer = %peer.cfg.id, error = %e, "send");
            peer.stats.dropped.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// Reads one packet from `lane`'s TUN queue (without waiting), encrypts it and sends it
    /// from the lane's socket.
    pub(super) fn tx_once(&self, lane: &Lane, st: &mut TxState) -> Step {
        let n = match (&lane.tun).read(&mut st.buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Empty,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Step::Worked,
            Err(e) => {
                tracing::error!(error = %e, "reading the tun device");
                return Step::Failed;
            }
        };
        let Some(h) = VirtioNetHdr::parse(&st.buf[..n]) else {
            return Step::Worked;
        };
        let pkt = &mut st.buf[VNET_HDR_LEN..n];
        if pkt.len() < 20 || pkt[0] >> 4 != 4 {
            return Step::Worked; // IPv4 only
        }
        let dst = Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]);
        let table = self.table();
        let Some(peer) = table.route(dst) else {
            self.no_route.fetch_add(1, Ordering::Relaxed);
            return Step::Worked;
        };
        // A peer with no endpoint waits to be called: starting a handshake here would only
        // build initiations that cannot be sent (and retry them for 90 s).
        if peer.endpoint().is_none() {
            peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return Step::Worked;
        }
        self.encrypt_and_send(&lane.udp, peer, &h, pkt, &mut st.out, &mut st.batches);
        Step::Worked
    }

    /// Encrypts every segment of `pkt` into `out` under the peer's session lock, then sends the
    /// batches with the lock released: a send that blocks (a full socket buffer) never holds up
    /// the receive half's decryption for the same peer.
    fn encrypt_and_send(
        &self,
        udp: &UdpSocket,
        peer: &Peer,
        h: &VirtioNetHdr,
        pkt: &mut [u8],
        out: &mut [u8],
        batches: &mut Batches,
    ) {
        batches.reset();
        let mut init = None;
        let (mut packets, mut bytes) = (0u64, 0u64);
        let mut tunn = peer.tunn.lock();
        let result = segment(h, pkt, |s| {
            if batches.pos + s.len() + 64 > out.len() {
                // No room left (only with many tiny segments): this much leaves under the lock.
                batches.close();
                for b in &batches.done {
                    self.send_batch(udp, peer, &out[b.start..b.end], b.seg, b.count);
                }
                batches.reset();
            }
            if batches.count > 0 && batches.pos - batches.start + s.len() + 64 > BATCH_BYTES {
                batches.close();
            }
            match tunn.encapsulate(s, &mut out[batches.pos..]) {
                TunnResult::WriteToNetwork(p) if p.first() == Some(&4) => {
                    batches.add(p.len());
                    packets += 1;
                    bytes += s.len() as u64;
                }
                // A handshake initiation (no session yet): sent on its own, after the batches.
                TunnResult::WriteToNetwork(p) => init = Some(p.to_vec()),
                TunnResult::Err(e) => {
                    tracing::debug!(peer = %peer.cfg.id, error = ?e, "encapsulate")
                }
                _ => {}
            }
        });
        drop(tunn);
        batches.close();
        // Our key switched since this thread took the table: this session is gone with the old
        // key, and nothing made with it leaves (one load per packet read).
        if !self.current(peer) {
            peer.stats.dropped.fetch_add(packets, Ordering::Relaxed);
            return;
        }
        for b in &batches.done {
            self.send_batch(udp, peer, &out[b.start..b.end], b.seg, b.count);
        }
        if let Some(init) = init {
            self.send(peer, &init);
        }
        if let Err(e) = result {
            tracing::debug!(peer = %peer.cfg.id, error = ?e, "segmenting a packet from the tun device");
            peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
        peer.stats.tx_packets.fetch_add(packets, Ordering::Relaxed);
        peer.stats.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

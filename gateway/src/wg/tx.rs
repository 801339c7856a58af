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
    device::Device,
    lanes::Lane,
    offload::{MAX_PACKET, VNET_HDR_LEN, VirtioNetHdr, segment},
    peers::Peer,
    poller::Step,
};

/// Largest batch handed to one UDP GSO `sendmsg` (the kernel's limit is one UDP datagram).
const BATCH_BYTES: usize = 65_000;
/// Most segments in one UDP GSO batch (`UDP_MAX_SEGMENTS`).
const MAX_SEGMENTS: u64 = 64;

/// The buffers of the send half (one packet in, one GSO batch out).
pub(super) struct TxState {
    buf: Vec<u8>,
    out: Vec<u8>,
    batches: Batches,
}

impl Default for TxState {
    fn default() -> Self {
        TxState {
            buf: vec![0u8; VNET_HDR_LEN + MAX_PACKET],
            // Every segment of the largest packet, encrypted, fits without a send in between.
            out: vec![0u8; 2 * (BATCH_BYTES + 2048)],
            batches: Batches::default(),
        }
    }
}

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

/// Encrypted packets laid out back to back in the output buffer, cut into UDP GSO batches:
/// equal-sized packets with at most one shorter one, last, and at most [`MAX_SEGMENTS`].
#[derive(Debug, Default)]
pub(super) struct Batches {
    /// Where the next packet goes.
    pos: usize,
    /// The open batch: its start, segment size and packet count; `short` once a shorter packet
    /// (which must be its last) was added.
    start: usize,
    seg: usize,
    count: u64,
    short: bool,
    done: Vec<Batch>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Batch {
    start: usize,
    end: usize,
    seg: usize,
    count: u64,
}

impl Batches {
    /// Counts a packet of `len` bytes just written at `pos`.
    fn add(&mut self, len: usize) {
        if self.count > 0 && (self.short || len > self.seg || self.count == MAX_SEGMENTS) {
            self.close();
        }
        if self.count == 0 {
            self.seg = len;
        } else if len < self.seg {
            self.short = true;
        }
        self.pos += len;
        self.count += 1;
    }

    /// Empty, keeping the list's allocation.
    fn reset(&mut self) {
        self.done.clear();
        (self.pos, self.start, self.seg, self.count, self.short) = (0, 0, 0, 0, false);
    }

    /// Ends the open batch (if it has packets) and opens the next one at `pos`.
    fn close(&mut self) {
        if self.count > 0 {
            self.done.push(Batch {
                start: self.start,
                end: self.pos,
                seg: self.seg,
                count: self.count,
            });
        }
        (self.start, self.count, self.short) = (self.pos, 0, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(lens: &[usize]) -> Vec<Batch> {
        let mut b = Batches::default();
        for &l in lens {
            b.add(l);
        }
        b.close();
        b.done
    }

    #[test]
    fn equal_packets_share_a_batch_and_a_shorter_one_ends_it() {
        let b = cut(&[100, 100, 60, 100]);
        assert_eq!(
            b,
            [
                Batch {
                    start: 0,
                    end: 260,
                    seg: 100,
                    count: 3
                },
                Batch {
                    start: 260,
                    end: 360,
                    seg: 100,
                    count: 1
                },
            ]
        );
    }

    #[test]
    fn a_longer_packet_or_the_segment_limit_starts_a_new_batch() {
        let b = cut(&[50, 80]);
        assert_eq!(b.len(), 2);
        assert_eq!((b[1].start, b[1].seg), (50, 80));
        let many = vec![10; MAX_SEGMENTS as usize + 1];
        let b = cut(&many);
        assert_eq!(
            b.iter().map(|b| b.count).collect::<Vec<_>>(),
            [MAX_SEGMENTS, 1]
        );
        assert_eq!(b[1].start, 10 * MAX_SEGMENTS as usize);
    }

    #[test]
    fn closing_an_empty_batch_adds_nothing() {
        assert!(cut(&[]).is_empty());
    }
}

//! TUN -> segment -> encrypt -> UDP (GSO): the send half of the data path.

use std::{
    io::{self, IoSlice, Read},
    net::Ipv4Addr,
    os::fd::AsRawFd,
    sync::atomic::Ordering,
};

use boringtun::noise::TunnResult;
use nix::sys::socket::{ControlMessage, MsgFlags, SockaddrStorage, sendmsg};

use super::{
    device::Device,
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
}

impl Default for TxState {
    fn default() -> Self {
        TxState {
            buf: vec![0u8; VNET_HDR_LEN + MAX_PACKET],
            out: vec![0u8; BATCH_BYTES + 2048],
        }
    }
}

impl Device {
    pub(super) fn send(&self, peer: &Peer, data: &[u8]) {
        match peer.endpoint() {
            Some(ep) => {
                if let Err(e) = self.udp.send_to(data, ep) {
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
    fn send_batch(&self, peer: &Peer, buf: &[u8], seg: usize, count: u64) {
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
                .try_for_each(|p| self.udp.send_to(p, ep).map(drop))
        } else {
            let iov = [IoSlice::new(buf)];
            let size = seg as u16;
            let cmsg = [ControlMessage::UdpGsoSegments(&size)];
            let addr = SockaddrStorage::from(ep);
            match sendmsg(
                self.udp.as_raw_fd(),
                &iov,
                &cmsg,
                MsgFlags::empty(),
                Some(&addr),
            ) {
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
                        .try_for_each(|p| self.udp.send_to(p, ep).map(drop))
                }
                Err(e) => Err(io::Error::from(e)),
            }
        };
        if let Err(e) = r {
            tracing::debug!(peer = %peer.cfg.id, error = %e, "send");
            peer.stats.dropped.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// Reads one packet from the TUN device (without waiting), encrypts and sends it.
    pub(super) fn tx_once(&self, st: &mut TxState) -> Step {
        let n = match (&self.tun).read(&mut st.buf) {
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
        self.encrypt_and_send(peer, &h, pkt, &mut st.out);
        Step::Worked
    }

    fn encrypt_and_send(&self, peer: &Peer, h: &VirtioNetHdr, pkt: &mut [u8], out: &mut [u8]) {
        let mut tunn = peer.tunn.lock();
        // The batch: `pos` bytes of `count` packets, all `seg` long; `short` once a shorter one
        // (which must be last) was added.
        let (mut pos, mut seg, mut count, mut short) = (0usize, 0usize, 0u64, false);
        let (mut packets, mut bytes) = (0u64, 0u64);
        let result = segment(h, pkt, |s| {
            if count > 0 && pos + s.len() + 64 > BATCH_BYTES {
                self.send_batch(peer, &out[..pos], seg, count);
                (pos, count, short) = (0, 0, false);
            }
            match tunn.encapsulate(s, &mut out[pos..]) {
                TunnResult::WriteToNetwork(p) if p.first() == Some(&4) => {
                    let len = p.len();
                    // A GSO batch is equal-sized packets with at most one shorter one, last.
                    if count > 0 && (short || len > seg || count == MAX_SEGMENTS) {
                        self.send_batch(peer, &out[..pos], seg, count);
                        out.copy_within(pos..pos + len, 0);
                        (pos, count, short) = (0, 0, false);
                    }
                    if count == 0 {
                        seg = len;
                    } else if len < seg {
                        short = true;
                    }
                    pos += len;
                    count += 1;
                    packets += 1;
                    bytes += s.len() as u64;
                }
                // A handshake initiation (no session yet): send it on its own.
                TunnResult::WriteToNetwork(p) => self.send(peer, p),
                TunnResult::Err(e) => {
                    tracing::debug!(peer = %peer.cfg.id, error = ?e, "encapsulate")
                }
                _ => {}
            }
        });
        drop(tunn);
        self.send_batch(peer, &out[..pos], seg, count);
        if let Err(e) = result {
            tracing::debug!(peer = %peer.cfg.id, error = ?e, "segmenting a packet from the tun device");
            peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
        peer.stats.tx_packets.fetch_add(packets, Ordering::Relaxed);
        peer.stats.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

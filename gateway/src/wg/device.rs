//! The device: sockets, threads and the per-packet work.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, IoSlice, IoSliceMut, Read, Write},
    net::{Ipv4Addr, SocketAddr, UdpSocket},
    os::fd::{AsFd, AsRawFd, OwnedFd},
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use boringtun::noise::{
    Packet, Tunn, TunnResult, errors::WireGuardError, handshake::parse_handshake_anon,
    rate_limiter::RateLimiter,
};
use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::socket::{
        ControlMessage, ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, sendmsg,
    },
};
use serde::{Deserialize, Serialize};

use super::{
    offload::{Coalescer, MAX_PACKET, VNET_HDR_LEN, VirtioNetHdr, segment},
    peers::{Peer, Table},
};
use crate::{config, keys::PrivateKey};

/// Largest datagram or packet handled.
const BUF: usize = 65_536;
/// How long blocking calls wait before checking for shutdown.
const TICK: Duration = Duration::from_millis(200);
/// Largest batch handed to one UDP GSO `sendmsg` (the kernel's limit is one UDP datagram).
const BATCH_BYTES: usize = 65_000;
/// Most segments in one UDP GSO batch (`UDP_MAX_SEGMENTS`).
const MAX_SEGMENTS: u64 = 64;
/// UDP socket buffer size (bytes).
const SOCKET_BUFFER: usize = 2 << 20;
/// Handshakes accepted per second before cookies are required.
const HANDSHAKE_RATE: u64 = 100;

/// One peer as `liqo-gateway status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    /// Cluster ID.
    pub id: String,
    /// Public key.
    pub public_key: String,
    /// Current endpoint.
    pub endpoint: Option<String>,
    /// Seconds since the last handshake.
    pub handshake_age_secs: Option<u64>,
    /// Inner packets sent.
    pub tx_packets: u64,
    /// Inner bytes sent.
    pub tx_bytes: u64,
    /// Inner packets received.
    pub rx_packets: u64,
    /// Inner bytes received.
    pub rx_bytes: u64,
    /// Packets dropped.
    pub dropped: u64,
}

/// A running WireGuard device.
pub struct Device {
    key: PrivateKey,
    limiter: Arc<RateLimiter>,
    table: RwLock<Arc<Table>>,
    tun: File,
    udp: UdpSocket,
    stop: AtomicBool,
    /// Set once the kernel refused a UDP GSO send.
    gso_off: AtomicBool,
    /// Packets from the TUN device with no peer for their destination.
    pub no_route: AtomicU64,
}

impl Device {
    /// A device over an open TUN descriptor and a bound UDP socket.
    pub fn new(key: PrivateKey, tun: OwnedFd, udp: UdpSocket) -> io::Result<Arc<Device>> {
        udp.set_read_timeout(Some(TICK))?;
        // Bursts of a fast sender must not overflow the socket while we decrypt.
        use nix::sys::socket::{setsockopt, sockopt};
        for (name, r) in [
            (
                "SO_RCVBUFFORCE",
                setsockopt(&udp, sockopt::RcvBufForce, &SOCKET_BUFFER),
            ),
            (
                "SO_SNDBUFFORCE",
                setsockopt(&udp, sockopt::SndBufForce, &SOCKET_BUFFER),
            ),
        ] {
            if let Err(e) = r {
                tracing::warn!(option = name, error = %e, "could not enlarge the UDP socket buffer");
            }
        }
        // Receive many datagrams per call, coalesced by the kernel.
        setsockopt(&udp, sockopt::UdpGroSegment, &true).map_err(io::Error::from)?;
        let limiter = Arc::new(RateLimiter::new(
            &crate::keys::x25519(&key.public()),
            HANDSHAKE_RATE,
        ));
        nix::fcntl::fcntl(
            &tun,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(io::Error::from)?;
        Ok(Arc::new(Device {
            key,
            limiter,
            table: RwLock::default(),
            tun: File::from(tun),
            udp,
            stop: AtomicBool::new(false),
            gso_off: AtomicBool::new(false),
            no_route: AtomicU64::new(0),
        }))
    }

    /// The current peer table.
    pub fn table(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the peers; unchanged peers keep their sessions and counters. New peers with a
    /// known endpoint are sent a handshake initiation right away, so the first packet does not
    /// wait for a keepalive.
    pub fn set_peers(&self, peers: &BTreeMap<String, config::Peer>) {
        let fresh: Vec<Arc<Peer>> = {
            let mut t = self.table.write().unwrap_or_else(|p| p.into_inner());
            let next = Arc::new(Table::build(&t, peers, &self.key, &self.limiter));
            let fresh = next
                .by_id
                .values()
                .filter(|p| {
                    t.by_id
                        .get(&p.cfg.id)
                        .is_none_or(|old| !Arc::ptr_eq(&old.tunn, &p.tunn))
                })
                .cloned()
                .collect();
            *t = next;
            fresh
        };
        let mut out = vec![0u8; 256];
        for peer in fresh.iter().filter(|p| p.endpoint().is_some()) {
            let r = peer
                .tunn
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .format_handshake_initiation(&mut out, false);
            if let TunnResult::WriteToNetwork(init) = r {
                self.send(peer, init);
            }
        }
    }

    /// The UDP port actually bound.
    pub fn port(&self) -> io::Result<u16> {
        Ok(self.udp.local_addr()?.port())
    }

    /// Starts the threads.
    pub fn start(self: &Arc<Self>) -> io::Result<Vec<JoinHandle<()>>> {
        let mut handles = Vec::new();
        for (name, f) in [
            ("wg-tun", Device::tun_loop as fn(&Device)),
            ("wg-udp", Device::udp_loop),
            ("wg-timers", Device::timer_loop),
        ] {
            let d = Arc::clone(self);
            handles.push(
                thread::Builder::new()
                    .name(name.into())
                    .spawn(move || f(&d))?,
            );
        }
        Ok(handles)
    }

    /// Asks the threads to stop (they notice within [`TICK`]).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn send(&self, peer: &Peer, data: &[u8]) {
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

    /// TUN -> segment -> encrypt -> UDP GSO.
    fn tun_loop(&self) {
        let mut buf = vec![0u8; VNET_HDR_LEN + MAX_PACKET];
        let mut out = vec![0u8; BATCH_BYTES + 2048];
        while !self.stopped() {
            // Non-blocking reads: under load the next packet is usually there already, so poll
            // (and sleep) only when the device is empty.
            let n = match (&self.tun).read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(self.tun.as_fd(), PollFlags::POLLIN)];
                    match poll(
                        &mut fds,
                        PollTimeout::try_from(TICK).unwrap_or(PollTimeout::NONE),
                    ) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                        Err(e) => {
                            tracing::error!(error = %e, "polling the tun device");
                            return;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::error!(error = %e, "reading the tun device");
                    return;
                }
            };
            let Some(h) = VirtioNetHdr::parse(&buf[..n]) else {
                continue;
            };
            let pkt = &mut buf[VNET_HDR_LEN..n];
            if pkt.len() < 20 || pkt[0] >> 4 != 4 {
                continue; // IPv4 only
            }
            let dst = Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]);
            let table = self.table();
            let Some(peer) = table.route(dst) else {
                self.no_route.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            // A peer with no endpoint waits to be called: starting a handshake here would only
            // build initiations that cannot be sent (and retry them for 90 s).
            if peer.endpoint().is_none() {
                peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.encrypt_and_send(peer, &h, pkt, &mut out);
        }
    }

    fn encrypt_and_send(&self, peer: &Peer, h: &VirtioNetHdr, pkt: &mut [u8], out: &mut [u8]) {
        let mut tunn = peer.tunn.lock().unwrap_or_else(|p| p.into_inner());
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

    /// The peer a datagram belongs to.
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

    /// UDP (GRO) -> decrypt -> coalesce -> TUN, answering handshakes.
    fn udp_loop(&self) {
        let mut buf = vec![0u8; BUF];
        let mut out = vec![0u8; BUF];
        let mut coalescer = Coalescer::default();
        let mut cookie = vec![0u8; 256];
        let mut cmsg = nix::cmsg_space!(i32);
        while !self.stopped() {
            let (n, from, seg) = {
                let mut iov = [IoSliceMut::new(&mut buf)];
                match recvmsg::<SockaddrStorage>(
                    self.udp.as_raw_fd(),
                    &mut iov,
                    Some(&mut cmsg),
                    MsgFlags::empty(),
                ) {
                    Ok(m) => {
                        let seg = m.cmsgs().ok().into_iter().flatten().find_map(|c| match c {
                            ControlMessageOwned::UdpGroSegments(s) => usize::try_from(s).ok(),
                            _ => None,
                        });
                        let from = m.address.as_ref().and_then(to_socket_addr);
                        (m.bytes, from, seg)
                    }
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
                    Err(e) => {
                        tracing::error!(error = %e, "receiving from the UDP socket");
                        return;
                    }
                }
            };
            let Some(from) = from else { continue };
            let table = self.table();
            let mut write = |frame: &[u8]| {
                if let Err(e) = (&self.tun).write(frame) {
                    tracing::debug!(error = %e, "writing to the tun device");
                }
            };
            for datagram in buf[..n].chunks(seg.unwrap_or(n).max(1)) {
                // Handshake initiations cost a key exchange to attribute: check MAC1 and the
                // rate limit first (answering with a cookie under load), as boringtun does.
                if datagram.first() == Some(&1) {
                    match self
                        .limiter
                        .verify_packet(Some(from.ip()), datagram, &mut cookie)
                    {
                        Ok(_) => {}
                        Err(TunnResult::WriteToNetwork(c)) => {
                            // A cookie reply that cannot be sent is a lost datagram: the
                            // initiator retries its handshake, and a flood must not stall here.
                            if let Err(e) = self.udp.send_to(c, from) {
                                tracing::debug!(%from, error = %e, "sending a cookie reply");
                            }
                            continue;
                        }
                        Err(_) => continue,
                    }
                }
                let Some(peer) = self.peer_of(&table, datagram) else {
                    continue;
                };
                self.decapsulate(&peer, from, datagram, &mut out, &mut coalescer, &mut write);
            }
            coalescer.finish(&mut write);
        }
    }

    fn decapsulate(
        &self,
        peer: &Peer,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
        coalescer: &mut Coalescer,
        write: &mut impl FnMut(&[u8]),
    ) {
        let mut tunn = peer.tunn.lock().unwrap_or_else(|p| p.into_inner());
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
                    if let Err(e) = self.udp.send_to(p, from) {
                        tracing::debug!(peer = %peer.cfg.id, error = %e, "send");
                    }
                }
                TunnResult::WriteToTunnelV4(p, src) => {
                    peer.saw(from);
                    if peer.allows(src) {
                        peer.stats.rx_packets.fetch_add(1, Ordering::Relaxed);
                        peer.stats
                            .rx_bytes
                            .fetch_add(p.len() as u64, Ordering::Relaxed);
                        coalescer.push(p, write);
                    } else {
                        tracing::debug!(peer = %peer.cfg.id, %src, "source outside the peer's allowed IPs");
                        peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                TunnResult::Done => {
                    if datagram.len() >= 4 && datagram[0] == 4 {
                        peer.saw(from); // an authenticated keepalive
                    }
                    return;
                }
                TunnResult::WriteToTunnelV6(..) => {
                    peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                TunnResult::Err(e) => {
                    tracing::debug!(peer = %peer.cfg.id, error = ?e, "decapsulate");
                    peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }

    /// Handshake retries, keepalives, expiry; the handshake rate limit resets every second.
    /// Peers with no endpoint are skipped: they wait to be called, and their timers start once
    /// an authenticated packet taught us where they are.
    fn timer_loop(&self) {
        let mut out = vec![0u8; BUF];
        let mut last_reset = Instant::now();
        // boringtun logs every retry of every peer without naming it (a warning each 5 s, an
        // error after 90 s); we log the peer's transitions ourselves, once each, instead.
        let quiet = tracing::Dispatch::none();
        while !self.stopped() {
            thread::sleep(Duration::from_millis(100));
            if last_reset.elapsed() >= Duration::from_secs(1) {
                self.limiter.reset_count();
                last_reset = Instant::now();
            }
            let table = self.table();
            for peer in table.by_id.values() {
                if peer.endpoint().is_none() {
                    continue;
                }
                let mut tunn = peer.tunn.lock().unwrap_or_else(|p| p.into_inner());
                let r = tracing::dispatcher::with_default(&quiet, || tunn.update_timers(&mut out));
                let expired = matches!(r, TunnResult::Err(WireGuardError::ConnectionExpired));
                if expired != peer.expired.swap(expired, Ordering::Relaxed) {
                    if expired {
                        tracing::warn!(peer = %peer.cfg.id, "no handshake answered; retrying when traffic for the peer or the peer itself arrives");
                    } else {
                        tracing::info!(peer = %peer.cfg.id, "handshaking again");
                    }
                }
                // Sent with the lock released: the data path may need it.
                drop(tunn);
                match r {
                    TunnResult::WriteToNetwork(p) => self.send(peer, p),
                    TunnResult::Err(WireGuardError::ConnectionExpired) | TunnResult::Done => {}
                    TunnResult::Err(e) => {
                        tracing::debug!(peer = %peer.cfg.id, error = ?e, "timers")
                    }
                    _ => {}
                }
            }
        }
    }

    /// Status of every peer.
    pub fn status(&self) -> Vec<PeerStatus> {
        self.table()
            .by_id
            .values()
            .map(|p| {
                let (age, ..) = p.tunn.lock().unwrap_or_else(|e| e.into_inner()).stats();
                let s = &p.stats;
                PeerStatus {
                    id: p.cfg.id.clone(),
                    public_key: p.cfg.public_key.to_string(),
                    endpoint: p.endpoint().map(|e| e.to_string()),
                    handshake_age_secs: age.map(|d| d.as_secs()),
                    tx_packets: s.tx_packets.load(Ordering::Relaxed),
                    tx_bytes: s.tx_bytes.load(Ordering::Relaxed),
                    rx_packets: s.rx_packets.load(Ordering::Relaxed),
                    rx_bytes: s.rx_bytes.load(Ordering::Relaxed),
                    dropped: s.dropped.load(Ordering::Relaxed),
                }
            })
            .collect()
    }
}

fn to_socket_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    s.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

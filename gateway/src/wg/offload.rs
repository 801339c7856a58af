//! Packet offloads in userspace, the lever that makes a userspace tunnel fast: one system call
//! moves tens of packets.
//!
//! - From the TUN device (`IFF_VNET_HDR` with TSO): the kernel hands over TCP super-packets of up
//!   to 64 KiB with a [`VirtioNetHdr`]; [`segment`] cuts them into wire-sized segments with full
//!   checksums, which are encrypted and sent with one UDP GSO `sendmsg`.
//! - To the TUN device: datagrams arrive coalesced by UDP GRO; after decryption [`Coalescer`]
//!   merges consecutive segments of a TCP flow back into one super-packet, written with one
//!   `write`.
//!
//! Pure functions over byte slices: no I/O here. IPv4 only; anything else passes through whole.

/// Size of the virtio-net header the TUN device prepends (`struct virtio_net_hdr`).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// Largest IPv4 packet.
pub const MAX_PACKET: usize = 65_535;
/// Largest IPv4 + TCP header (60 + 60 bytes).
const MAX_HEADERS: usize = 120;

/// The virtio-net header of a packet read from or written to the TUN device (native endian).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtioNetHdr {
    /// `F_NEEDS_CSUM` or 0.
    pub flags: u8,
    /// `GSO_*`.
    pub gso_type: u8,
    /// Length of the headers (IP + TCP) of a GSO packet.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO packet.
    pub gso_size: u16,
    /// Where checksumming starts.
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum goes.
    pub csum_offset: u16,
}

impl VirtioNetHdr {
    /// Reads a header.
    pub fn parse(b: &[u8]) -> Option<VirtioNetHdr> {
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VirtioNetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Writes the header into `b[..10]`.
    pub fn write(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }
}

/// `a + b` with the carry wrapped around (one's complement addition on 64 bits).
fn add(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + u64::from(carry)
}

/// One's complement sum of `data` added to `sum` (not folded).
pub fn sum(data: &[u8], mut sum: u64) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        sum = add(sum, u64::from_be_bytes(c.try_into().expect("8 bytes")));
    }
    let rest = chunks.remainder();
    let mut i = 0;
    while i + 1 < rest.len() {
        sum = add(sum, u64::from(u16::from_be_bytes([rest[i], rest[i + 1]])));
        i += 2;
    }
    if i < rest.len() {
        sum = add(sum, u64::from(rest[i]) << 8);
    }
    sum
}

/// Folds a sum to 16 bits (not inverted).
pub fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 header checksum of `ip` (its checksum field is ignored).
pub fn ipv4_checksum(ip: &[u8]) -> u16 {
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    !fold(sum(&ip[12..ihl], sum(&ip[..10], 0)))
}

/// Pseudo-header sum of an IPv4 packet for protocol `proto` and L4 length `len`.
fn pseudo(ip: &[u8], proto: u8, len: usize) -> u64 {
    sum(&ip[12..20], u64::from(proto) + len as u64)
}

/// Sets the IPv4 header checksum in place.
fn fix_ipv4_checksum(ip: &mut [u8]) {
    ip[10..12].copy_from_slice(&[0, 0]);
    let c = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Sets the full TCP checksum of an IPv4 packet in place.
fn fix_tcp_checksum(pkt: &mut [u8], ihl: usize) {
    pkt[ihl + 16..ihl + 18].copy_from_slice(&[0, 0]);
    let c = !fold(sum(&pkt[ihl..], pseudo(pkt, 6, pkt.len() - ihl)));
    pkt[ihl + 16..ihl + 18].copy_from_slice(&c.to_be_bytes());
}

/// Why a packet from the TUN device could not be segmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentError {
    /// The header or packet is inconsistent.
    Malformed,
    /// A GSO type we did not ask for.
    Unsupported(u8),
}

/// Cuts a packet read from the TUN device (after its virtio header) into wire packets with
/// complete checksums, calling `emit` for each in order.
pub fn segment(
    h: &VirtioNetHdr,
    pkt: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<(), SegmentError> {
    if h.gso_type == GSO_NONE {
        if h.flags & F_NEEDS_CSUM != 0 {
            let (start, off) = (usize::from(h.csum_start), usize::from(h.csum_offset));
            if start + off + 2 > pkt.len() {
                return Err(SegmentError::Malformed);
            }
            // The field holds the pseudo-header sum; sum the rest over it.
            let c = !fold(sum(&pkt[start..], 0));
            pkt[start + off..start + off + 2].copy_from_slice(&c.to_be_bytes());
        }
        emit(pkt);
        return Ok(());
    }
    if h.gso_type != GSO_TCPV4 {
        return Err(SegmentError::Unsupported(h.gso_type));
    }
    if pkt.len() < 40 || pkt[0] >> 4 != 4 || pkt[9] != 6 {
        return Err(SegmentError::Malformed);
    }
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    if ihl < 20 || pkt.len() < ihl + 20 {
        return Err(SegmentError::Malformed);
    }
    let thl = usize::from(pkt[ihl + 12] >> 4) * 4;
    let hdr = ihl + thl;
    let mss = usize::from(h.gso_size);
    if mss == 0 || hdr > pkt.len() || thl < 20 {
        return Err(SegmentError::Malformed);
    }
    if hdr > MAX_HEADERS {
        return Err(SegmentError::Malformed);
    }
    // Segment `i` is built in place: its headers are written just before its payload, over bytes
    // of the previous segment that were already emitted.
    let mut headers = [0u8; MAX_HEADERS];
    headers[..hdr].copy_from_slice(&pkt[..hdr]);
    let headers = &headers[..hdr];
    let id = u16::from_be_bytes([headers[4], headers[5]]);
    let seq = u32::from_be_bytes(headers[ihl + 4..ihl + 8].try_into().expect("4 bytes"));
    let flags = headers[ihl + 13];
    let payload = pkt.len() - hdr;
    let n = payload.div_ceil(mss);
    for i in 0..n {
        let chunk = mss.min(payload - i * mss);
        let start = i * mss;
        let len = hdr + chunk;
        let s = &mut pkt[start..start + len];
        s[..hdr].copy_from_slice(headers);
        s[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        s[4..6].copy_from_slice(&id.wrapping_add(i as u16).to_be_bytes());
        fix_ipv4_checksum(&mut s[..ihl]);
        s[ihl + 4..ihl + 8].copy_from_slice(&seq.wrapping_add((i * mss) as u32).to_be_bytes());
        // FIN and PSH only on the last segment, CWR only on the first.
        let mut f = flags;
        if i + 1 < n {
            f &= !(0x01 | 0x08);
        }
        if i > 0 {
            f &= !0x80;
        }
        s[ihl + 13] = f;
        fix_tcp_checksum(s, ihl);
        emit(s);
    }
    Ok(())
}

/// The TCP flow a packet belongs to and what must match for two segments to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flow {
    /// saddr, daddr, sport, dport.
    addrs: [u8; 12],
    /// ACK number.
    ack: u32,
    /// Window, TOS, TTL, the DF bit and the TCP data-offset byte (reserved and AE bits).
    window: u16,
    tos_ttl: [u8; 2],
    df_doff: [u8; 2],
    /// TCP header length (options must be equal too).
    thl: usize,
}

/// Whether `pkt` is a plain IPv4 TCP segment that may be merged: no IP options or fragments,
/// only ACK (and PSH) set, some payload.
fn mergeable(pkt: &[u8]) -> Option<(Flow, u32, usize)> {
    if pkt.len() < 40 || pkt[0] != 0x45 || pkt[9] != 6 {
        return None;
    }
    let frag = u16::from_be_bytes([pkt[6], pkt[7]]);
    if frag & 0x3fff != 0 {
        return None; // MF or an offset
    }
    if usize::from(u16::from_be_bytes([pkt[2], pkt[3]])) != pkt.len() {
        return None;
    }
    let thl = usize::from(pkt[32] >> 4) * 4;
    let flags = pkt[33];
    if thl < 20 || 20 + thl >= pkt.len() || flags & !0x18 != 0 || flags & 0x10 == 0 {
        return None;
    }
    let mut addrs = [0u8; 12];
    addrs[..8].copy_from_slice(&pkt[12..20]);
    addrs[8..].copy_from_slice(&pkt[20..24]);
    let flow = Flow {
        addrs,
        ack: u32::from_be_bytes(pkt[28..32].try_into().expect("4 bytes")),
        window: u16::from_be_bytes([pkt[34], pkt[35]]),
        tos_ttl: [pkt[1], pkt[8]],
        df_doff: [pkt[6] & 0x40, pkt[32]],
        thl,
    };
    let seq = u32::from_be_bytes(pkt[24..28].try_into().expect("4 bytes"));
    Some((flow, seq, pkt.len() - 20 - thl))
}

/// Whether the IPv4 header (20 bytes, checked by `mergeable`) and TCP checksums are right.
fn checksums_ok(pkt: &[u8]) -> bool {
    fold(sum(&pkt[..20], 0)) == 0xffff
        && fold(sum(&pkt[20..], pseudo(pkt, 6, pkt.len() - 20))) == 0xffff
}

/// Merges consecutive TCP segments of one flow into super-packets for the TUN device.
///
/// Feed packets in arrival order with [`Coalescer::push`]; each finished packet (with its virtio
/// header in front) goes to the `flush` callback. Call [`Coalescer::finish`] at the end of a
/// batch.
pub struct Coalescer {
    buf: Vec<u8>,
    /// State of the packet being built: flow, next expected sequence, segment size, count,
    /// whether the last segment was short or had PSH (nothing may follow it).
    open: Option<(Flow, u32, usize, usize, bool)>,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer {
            buf: Vec::with_capacity(VNET_HDR_LEN + MAX_PACKET),
            open: None,
        }
    }
}

impl Coalescer {
    /// Adds one decrypted packet.
    pub fn push(&mut self, pkt: &[u8], flush: &mut impl FnMut(&[u8])) {
        // A merged packet goes up marked "checksum partial", which the kernel does not verify:
        // check each segment here, and let a bad one pass alone, to be dropped as usual.
        let Some((flow, seq, payload)) = mergeable(pkt).filter(|_| checksums_ok(pkt)) else {
            self.finish(flush);
            self.single(pkt, flush);
            return;
        };
        let psh = pkt[33] & 0x08 != 0;
        if let Some((f, next, mss, count, closed)) = self.open {
            let same_options =
                self.buf[VNET_HDR_LEN + 40..VNET_HDR_LEN + 20 + f.thl] == pkt[40..20 + flow.thl];
            let fits = self.buf.len() + payload <= VNET_HDR_LEN + MAX_PACKET;
            if f == flow && next == seq && !closed && payload <= mss && same_options && fits {
                self.buf.extend_from_slice(&pkt[20 + flow.thl..]);
                if psh {
                    self.buf[VNET_HDR_LEN + 33] |= 0x08;
                }
                self.open = Some((
                    f,
                    seq.wrapping_add(payload as u32),
                    mss,
                    count + 1,
                    payload < mss || psh,
                ));
                return;
            }
            self.finish(flush);
        }
        self.buf.clear();
        self.buf.resize(VNET_HDR_LEN, 0);
        self.buf.extend_from_slice(pkt);
        self.open = Some((flow, seq.wrapping_add(payload as u32), payload, 1, psh));
    }

    /// Writes out the packet being built.
    pub fn finish(&mut self, flush: &mut impl FnMut(&[u8])) {
        let Some((flow, _, mss, count, _)) = self.open.take() else {
            return;
        };
        let ip = &mut self.buf[VNET_HDR_LEN..];
        if count == 1 {
            VirtioNetHdr::default().write(&mut self.buf);
            flush(&self.buf);
            return;
        }
        let total = ip.len();
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        fix_ipv4_checksum(&mut ip[..20]);
        // Partial checksum: the pseudo-header sum, to be completed by the kernel.
        let partial = fold(pseudo(ip, 6, total - 20));
        ip[36..38].copy_from_slice(&partial.to_be_bytes());
        VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: (20 + flow.thl) as u16,
            gso_size: mss as u16,
            csum_start: 20,
            csum_offset: 16,
        }
        .write(&mut self.buf);
        flush(&self.buf);
    }

    fn single(&mut self, pkt: &[u8], flush: &mut impl FnMut(&[u8])) {
        self.buf.clear();
        self.buf.resize(VNET_HDR_LEN, 0);
        self.buf.extend_from_slice(pkt);
        flush(&self.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP/IPv4 packet with `payload` bytes, timestamps option, given seq and flags.
    fn tcp(seq: u32, payload: &[u8], flags: u8) -> Vec<u8> {
        let thl = 32;
        let mut p = vec![0u8; 20 + thl];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((20 + thl + payload.len()) as u16).to_be_bytes());
        p[4..6].copy_from_slice(&7u16.to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 200, 0, 2]);
        p[16..20].copy_from_slice(&[10, 71, 0, 2]);
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[28..32].copy_from_slice(&99u32.to_be_bytes());
        p[32] = ((thl / 4) as u8) << 4;
        p[33] = flags;
        p[34..36].copy_from_slice(&500u16.to_be_bytes());
        p[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]); // NOP NOP TS
        p.extend_from_slice(payload);
        fix_ipv4_checksum(&mut p[..20]);
        fix_tcp_checksum(&mut p, 20);
        p
    }

    /// A header whose checksum is right sums (with it) to 0xffff.
    fn ip_ok(p: &[u8]) -> bool {
        fold(sum(&p[..20], 0)) == 0xffff
    }

    fn tcp_ok(p: &[u8]) -> bool {
        ip_ok(p) && fold(pseudo(p, 6, p.len() - 20) + sum(&p[20..], 0)) == 0xffff
    }

    /// The textbook 16-bit one's complement sum.
    fn naive(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for pair in data.chunks(2) {
            s += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn the_fast_sum_equals_the_textbook_one() {
        // All ones drives the 64-bit accumulator to its limit; odd lengths exercise the tail.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in (0..200).chain([1499, 1500, 1501, 65_535]) {
            for fill in [0xffu8, 0x00, 0x80] {
                let data = vec![fill; len];
                assert_eq!(
                    fold(sum(&data, 0)),
                    naive(&data),
                    "len {len} fill {fill:#x}"
                );
            }
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(fold(sum(&data, 0)), naive(&data), "random, len {len}");
            // 2^64 - 1 is a multiple of 0xffff: a start of u64::MAX - 3 acts as 0xfffc.
            assert_eq!(
                fold(sum(&data, u64::MAX - 3)),
                fold(u64::from(naive(&data)) + 0xfffc),
                "large start, len {len}"
            );
        }
    }

    #[test]
    fn checksums_match_a_reference() {
        // RFC 1071 example bytes.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d, 0)), 0xddf2);
        let p = tcp(1, b"hello", 0x18);
        assert!(tcp_ok(&p));
        let mut bad = p.clone();
        bad[30] ^= 0x40;
        assert!(!tcp_ok(&bad), "a flipped bit is caught");
    }

    #[test]
    fn gso_packets_are_cut_with_valid_checksums_and_flags() {
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let mut big = tcp(1000, &payload, 0x18 | 0x01); // ACK PSH FIN
        let h = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1388,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut segs = Vec::new();
        segment(&h, &mut big, |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(segs.len(), 3);
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            assert!(tcp_ok(s), "segment {i} checksums");
            assert_eq!(u16::from_be_bytes([s[2], s[3]]) as usize, s.len());
            assert_eq!(
                u32::from_be_bytes(s[24..28].try_into().unwrap()),
                1000 + (i as u32) * 1388
            );
            assert_eq!(u16::from_be_bytes([s[4], s[5]]), 7 + i as u16);
            let last = i == 2;
            assert_eq!(s[33] & 0x09 != 0, last, "FIN/PSH only on the last");
            joined.extend_from_slice(&s[52..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn partial_checksums_are_completed() {
        let mut p = tcp(1, b"abcdef", 0x18);
        let good = p.clone();
        // What the kernel hands over with NEEDS_CSUM: the pseudo-header sum in the field.
        let partial = fold(pseudo(&p, 6, p.len() - 20));
        p[36..38].copy_from_slice(&partial.to_be_bytes());
        let h = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..Default::default()
        };
        let mut out = Vec::new();
        segment(&h, &mut p, |s| out = s.to_vec()).unwrap();
        assert_eq!(out, good);
    }

    #[test]
    fn segments_of_a_flow_coalesce_back() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut big = tcp(1, &payload, 0x18);
        let h = VirtioNetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1388,
            hdr_len: 52,
            ..Default::default()
        };
        let mut segs = Vec::new();
        segment(&h, &mut big, |s| segs.push(s.to_vec())).unwrap();
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        let mut flush = |b: &[u8]| out.push(b.to_vec());
        for s in &segs {
            c.push(s, &mut flush);
        }
        c.finish(&mut flush);
        assert_eq!(out.len(), 1, "one super-packet");
        let v = VirtioNetHdr::parse(&out[0]).unwrap();
        assert_eq!(
            (v.gso_type, v.gso_size, v.hdr_len, v.flags),
            (GSO_TCPV4, 1388, 52, F_NEEDS_CSUM)
        );
        let ip = &out[0][VNET_HDR_LEN..];
        assert_eq!(&ip[52..], &payload[..]);
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len());
        assert!(ip_ok(ip));
        assert_eq!(ip[33] & 0x08, 0x08, "PSH of the last segment kept");
        // The partial checksum completes to a valid one.
        let mut full = ip.to_vec();
        let c2 = !fold(sum(&full[20..], 0));
        full[36..38].copy_from_slice(&c2.to_be_bytes());
        assert!(tcp_ok(&full));
    }

    #[test]
    fn malformed_headers_are_refused_not_panicked_on() {
        let h = VirtioNetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 100,
            ..Default::default()
        };
        for ihl_byte in [0x4f, 0x42, 0x40] {
            let mut p = tcp(1, &[0; 300], 0x10);
            p[0] = ihl_byte;
            assert_eq!(
                segment(&h, &mut p, |_| {}),
                Err(SegmentError::Malformed),
                "IHL byte {ihl_byte:#x}"
            );
        }
    }

    #[test]
    fn segments_differing_in_df_or_reserved_bits_stay_apart() {
        let a = tcp(1, &[1; 100], 0x10);
        let mut b = tcp(101, &[2; 100], 0x10);
        b[6] = 0; // DF cleared
        let ip = &mut b;
        ip[10..12].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut co = Coalescer::default();
        let mut out = Vec::new();
        let mut flush = |x: &[u8]| out.push(x.to_vec());
        co.push(&a, &mut flush);
        co.push(&b, &mut flush);
        co.finish(&mut flush);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn a_corrupted_segment_is_not_merged() {
        let a = tcp(1, &[1; 100], 0x10);
        let mut b = tcp(101, &[2; 100], 0x10);
        b[100] ^= 0x01; // payload bit flip: the TCP checksum no longer matches
        let mut co = Coalescer::default();
        let mut out = Vec::new();
        let mut flush = |x: &[u8]| out.push(x.to_vec());
        co.push(&a, &mut flush);
        co.push(&b, &mut flush);
        co.finish(&mut flush);
        assert_eq!(
            out.len(),
            2,
            "the bad segment passes alone, with its bad checksum"
        );
        assert_eq!(&out[1][VNET_HDR_LEN..], &b[..]);
    }

    #[test]
    fn what_cannot_merge_passes_through_alone() {
        let a = tcp(1, &[1; 100], 0x10);
        let gap = tcp(500, &[2; 100], 0x10); // not contiguous
        let syn = tcp(600, &[], 0x02);
        let other_flow = {
            let mut p = tcp(700, &[3; 100], 0x10);
            p[23] ^= 1;
            p
        };
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        let mut flush = |b: &[u8]| out.push(b.to_vec());
        for p in [&a, &gap, &syn, &other_flow] {
            c.push(p, &mut flush);
        }
        c.finish(&mut flush);
        assert_eq!(out.len(), 4);
        for (o, p) in out.iter().zip([&a, &gap, &syn, &other_flow]) {
            assert_eq!(VirtioNetHdr::parse(o).unwrap(), VirtioNetHdr::default());
            assert_eq!(&o[VNET_HDR_LEN..], &p[..]);
        }
    }
}

//! The layout of the send half's output: encrypted packets back to back, cut into UDP GSO
//! batches (equal-sized packets, at most one shorter last, at most [`MAX_SEGMENTS`]).

/// Largest batch handed to one UDP GSO `sendmsg` (the kernel's limit is one UDP datagram).
pub(super) const BATCH_BYTES: usize = 65_000;
/// Most segments in one UDP GSO batch (`UDP_MAX_SEGMENTS`).
pub(super) const MAX_SEGMENTS: u64 = 64;

/// Encrypted packets laid out back to back in the output buffer, cut into UDP GSO batches:
/// equal-sized packets with at most one shorter one, last, and at most [`MAX_SEGMENTS`].
#[derive(Debug, Default)]
pub(super) struct Batches {
    /// Where the next packet goes.
    pub(super) pos: usize,
    /// The open batch: its start, segment size and packet count; `short` once a shorter packet
    /// (which must be its last) was added.
    pub(super) start: usize,
    seg: usize,
    pub(super) count: u64,
    short: bool,
    /// The closed batches.
    pub(super) done: Vec<Batch>,
}

/// One UDP GSO batch: `out[start..end]`, `count` packets of `seg` bytes (the last may be
/// shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Batch {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) seg: usize,
    pub(super) count: u64,
}

impl Batches {
    /// Counts a packet of `len` bytes just written at `pos`.
    pub(super) fn add(&mut self, len: usize) {
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
    pub(super) fn reset(&mut self) {
        self.done.clear();
        (self.pos, self.start, self.seg, self.count, self.short) = (0, 0, 0, 0, false);
    }

    /// Ends the open batch (if it has packets) and opens the next one at `pos`.
    pub(super) fn close(&mut self) {
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

//! Free space of the pools as aligned blocks (a buddy allocator over IPv4 prefixes).
//!
//! `free[len]` holds the start addresses of free blocks of prefix length `len`. Taking a specific
//! prefix splits the free block that contains it; allocating a length takes the lowest free block
//! of that length, or splits the lowest block of the smallest larger length (best fit). Freeing
//! merges a block with its free buddy, never across a pool boundary. Every operation is
//! O(32 log n) and deterministic.

use std::collections::BTreeSet;

use ipnet::Ipv4Net;

fn size(len: u8) -> u64 {
    1u64 << (32 - u32::from(len))
}

fn net(start: u32, len: u8) -> Ipv4Net {
    Ipv4Net::new(start.into(), len).expect("len <= 32")
}

fn start_of(n: &Ipv4Net) -> u32 {
    n.network().into()
}

fn last_of(n: &Ipv4Net) -> u32 {
    n.broadcast().into()
}

#[derive(Debug, Clone)]
pub(crate) struct Buddy {
    pools: Vec<Ipv4Net>,
    free: Vec<BTreeSet<u32>>,
}

impl Buddy {
    /// All of `pools` free. Pools must not overlap.
    pub(crate) fn new(pools: &[Ipv4Net]) -> Buddy {
        let mut b = Buddy {
            pools: pools.to_vec(),
            free: vec![BTreeSet::new(); 33],
        };
        b.pools.sort();
        for p in pools {
            b.free[usize::from(p.prefix_len())].insert(start_of(p));
        }
        b
    }

    /// The pool that contains `n`, if any.
    pub(crate) fn pool_of(&self, n: &Ipv4Net) -> Option<&Ipv4Net> {
        self.pools.iter().find(|p| p.contains(n))
    }

    /// Whether `n` overlaps some pool.
    pub(crate) fn overlaps_pool(&self, n: &Ipv4Net) -> bool {
        self.pools.iter().any(|p| p.contains(n) || n.contains(p))
    }

    /// The free block that contains `n`, as `(start, len)`.
    fn free_ancestor(&self, n: &Ipv4Net) -> Option<(u32, u8)> {
        let s = start_of(n);
        (0..=n.prefix_len()).rev().find_map(|len| {
            let a = start_of(&net(s, len).trunc());
            self.free[usize::from(len)].contains(&a).then_some((a, len))
        })
    }

    /// Whether all of `n` is free.
    pub(crate) fn is_free(&self, n: &Ipv4Net) -> bool {
        self.free_ancestor(n).is_some()
    }

    /// Splits the free block `(a, alen)` down to `n`, returning the other halves to the free
    /// lists; `n` ends up taken.
    fn split_to(&mut self, (a, alen): (u32, u8), n: &Ipv4Net) {
        self.free[usize::from(alen)].remove(&a);
        let target = start_of(n);
        let mut start = a;
        for len in alen + 1..=n.prefix_len() {
            let half = size(len) as u32;
            // Keep the half holding the target, free the other.
            if target >= start + half {
                self.free[usize::from(len)].insert(start);
                start += half;
            } else {
                self.free[usize::from(len)].insert(start + half);
            }
        }
    }

    /// Takes exactly `n` if all of it is free; returns whether it did.
    pub(crate) fn take(&mut self, n: &Ipv4Net) -> bool {
        match self.free_ancestor(n) {
            Some(a) => {
                self.split_to(a, n);
                true
            }
            None => false,
        }
    }

    /// Marks every free address of `n` as used (for fixed regions that may overlap each other
    /// or cover whole pools).
    pub(crate) fn carve(&mut self, n: &Ipv4Net) {
        if self.take(n) {
            return;
        }
        let (lo, hi) = (start_of(n), last_of(n));
        for len in n.prefix_len()..=32 {
            let inside: Vec<u32> = self.free[usize::from(len)]
                .range(lo..=hi)
                .copied()
                .collect();
            for s in inside {
                self.free[usize::from(len)].remove(&s);
            }
        }
    }

    /// Allocates a block of length `len` inside `pool`: the lowest free block of that length
    /// there, else the lowest block of the smallest larger length there, split (best fit).
    pub(crate) fn alloc_in(&mut self, pool: &Ipv4Net, len: u8) -> Option<Ipv4Net> {
        if len < pool.prefix_len() {
            return None;
        }
        let (lo, hi) = (start_of(pool), last_of(pool));
        let (from, a) = (pool.prefix_len()..=len).rev().find_map(|l| {
            self.free[usize::from(l)]
                .range(lo..=hi)
                .next()
                .map(|a| (l, *a))
        })?;
        let n = net(a, len);
        self.split_to((a, from), &n);
        Some(n)
    }

    /// Allocates a block of length `len` from the first of `pools` (in the given order) that has
    /// room; see [`Buddy::alloc_in`].
    pub(crate) fn alloc(&mut self, pools: &[Ipv4Net], len: u8) -> Option<Ipv4Net> {
        pools.iter().find_map(|p| self.alloc_in(p, len))
    }

    /// Returns `n` (a block taken earlier) and merges it with its free buddies.
    pub(crate) fn free(&mut self, n: &Ipv4Net) {
        let pool_len = self.pool_of(n).map_or(n.prefix_len(), Ipv4Net::prefix_len);
        let (mut s, mut len) = (start_of(n), n.prefix_len());
        while len > pool_len {
            let buddy = s ^ (size(len) as u32);
            if !self.free[usize::from(len)].remove(&buddy) {
                break;
            }
            s &= !(size(len) as u32);
            len -= 1;
        }
        self.free[usize::from(len)].insert(s);
    }

    /// Free addresses inside `pool`.
    pub(crate) fn free_in(&self, pool: &Ipv4Net) -> u64 {
        let (lo, hi) = (start_of(pool), last_of(pool));
        self.free
            .iter()
            .enumerate()
            .map(|(len, set)| set.range(lo..=hi).count() as u64 * size(len as u8))
            .sum()
    }

    /// The pools, sorted.
    pub(crate) fn pools(&self) -> &[Ipv4Net] {
        &self.pools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn take_alloc_free_round_trip() {
        let mut b = Buddy::new(&[n("10.0.0.0/8")]);
        assert!(b.take(&n("10.200.0.0/16")));
        assert!(!b.take(&n("10.200.0.0/16")), "taken twice");
        assert!(!b.is_free(&n("10.200.5.0/24")));
        assert!(b.is_free(&n("10.201.0.0/16")));
        // Best fit: the free buddy of the taken block first, then the lowest of the next size.
        let pools = [n("10.0.0.0/8")];
        assert_eq!(b.alloc(&pools, 16), Some(n("10.201.0.0/16")));
        assert_eq!(b.alloc(&pools, 16), Some(n("10.202.0.0/16")));
        assert_eq!(b.free_in(&n("10.0.0.0/8")), (1 << 24) - 3 * (1 << 16));
        for x in ["10.201.0.0/16", "10.202.0.0/16", "10.200.0.0/16"] {
            b.free(&n(x));
        }
        assert_eq!(b.free[8].len(), 1, "fully merged back into the pool");
        assert_eq!(b.free_in(&n("10.0.0.0/8")), 1 << 24);
    }

    #[test]
    fn best_fit_prefers_split_blocks() {
        let mut b = Buddy::new(&[n("10.0.0.0/8"), n("192.168.0.0/16")]);
        assert!(b.take(&n("10.0.0.0/24")));
        let pools = [n("10.0.0.0/8"), n("192.168.0.0/16")];
        // A /24 comes from the already split /24 sibling, not from a fresh large block.
        assert_eq!(b.alloc(&pools, 24), Some(n("10.0.1.0/24")));
        assert_eq!(b.alloc(&pools, 30), Some(n("10.0.2.0/30")));
        // Pools are used in the order given, even when a later one fits exactly.
        assert_eq!(b.alloc(&pools, 16), Some(n("10.1.0.0/16")));
        assert_eq!(
            b.alloc(&[pools[1], pools[0]], 16),
            Some(n("192.168.0.0/16"))
        );
    }

    #[test]
    fn carve_handles_overlapping_and_covering_regions() {
        let mut b = Buddy::new(&[n("192.168.0.0/16")]);
        b.carve(&n("192.168.1.0/24"));
        b.carve(&n("192.168.0.0/23")); // covers the first carve
        assert!(!b.is_free(&n("192.168.0.0/24")));
        b.carve(&n("192.0.0.0/8")); // covers the whole pool
        assert_eq!(b.free_in(&n("192.168.0.0/16")), 0);
        assert_eq!(b.alloc(&[n("192.168.0.0/16")], 24), None);
    }

    #[test]
    fn free_never_merges_across_pools() {
        let mut b = Buddy::new(&[n("10.0.0.0/9"), n("10.128.0.0/9")]);
        let x = b.alloc(&[n("10.0.0.0/9")], 9).unwrap();
        b.free(&x);
        assert_eq!(b.free[8].len(), 0);
        assert_eq!(b.free[9].len(), 2);
    }
}

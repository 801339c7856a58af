//! When a map or a store gives its memory back (pure): once it holds at most a quarter of
//! the most it held, and that was large. A hash map never shrinks as entries are removed;
//! shrunk to twice its size at that point, each shrink costs one pass over what is left after
//! at least as many removals (constant time per removal). `liqo_auth::compact` applies the
//! same rule to reflector stores.

use std::{
    collections::{HashMap, HashSet},
    hash::{BuildHasher, Hash},
};

/// Below this many objects at its largest, a store or a map is left as it is (its table is
/// at most about 13 KiB). Not higher: a store of a thousand pods kept a table of 100-250 KiB
/// after they were all deleted; several such were a megabyte a virtual kubelet never gave
/// back.
pub const MIN_PEAK: usize = 64;

/// Whether a store that held `peak` objects at most since it was built, and holds `len` now,
/// is rebuilt.
pub fn due(peak: usize, len: usize) -> bool {
    peak >= MIN_PEAK && len.saturating_mul(4) <= peak
}

/// Shrinks `map` to twice its length once it is at most a quarter full (and was large).
pub fn shrink<K: Eq + Hash, V, H: BuildHasher>(map: &mut HashMap<K, V, H>) {
    if due(map.capacity(), map.len()) {
        map.shrink_to(map.len().saturating_mul(2));
    }
}

/// [`shrink`] for a set.
pub fn shrink_set<K: Eq + Hash, H: BuildHasher>(set: &mut HashSet<K, H>) {
    if due(set.capacity(), set.len()) {
        set.shrink_to(set.len().saturating_mul(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_a_large_store_is_a_quarter_full() {
        assert!(!due(MIN_PEAK - 1, 0), "small: never");
        assert!(due(MIN_PEAK, 0));
        assert!(due(4000, 1000));
        assert!(!due(4000, 1001));
    }

    #[test]
    fn a_map_shrinks_once_a_quarter_full() {
        let mut m: HashMap<usize, usize> = (0..4 * MIN_PEAK).map(|i| (i, i)).collect();
        let full = m.capacity();
        for i in 0..3 * MIN_PEAK {
            m.remove(&i);
            shrink(&mut m);
        }
        assert_eq!(m.len(), MIN_PEAK);
        // Never more than four times the entries (it was seven).
        assert!(m.capacity() <= 4 * m.len(), "{} of {full}", m.capacity());
        assert!(m.capacity() <= full / 2, "{} of {full}", m.capacity());
        let mut s: HashSet<usize> = (0..4 * MIN_PEAK).collect();
        s.retain(|i| *i < 10);
        shrink_set(&mut s);
        assert!(s.capacity() < 64, "{}", s.capacity());
        assert_eq!(s.len(), 10);
    }
}

//! The heap, counted: [`Counting`] wraps the global allocator and keeps, by power-of-two size
//! class, the blocks and bytes the program holds; [`heap`] reads them beside the process's
//! anonymous resident memory (RssAnon). The figures go to Prometheus ([`HeapCollector`]) and
//! to the log ([`report_heap`], with the classes holding the most).
//!
//! Why: a process's RSS after a burst mixes what it still holds (a table that did not shrink,
//! a buffer grown once) with what its allocator keeps (free pages not yet purged, pages pinned
//! by a few live objects). The live bytes tell them apart, and the size classes tell a few big
//! blocks (tables, buffers) from many small ones (objects left behind).
//!
//! It never changes what the allocator does: every call is passed on unchanged; counting costs
//! two relaxed atomic adds on one cache line per allocation and per free (four per realloc).

use std::{
    alloc::{GlobalAlloc, Layout},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::gauge::ConstGauge,
    registry::Unit,
};

/// Size classes: class `c` holds the blocks of `2^(c-1)` to `2^c - 1` bytes (class 0: empty).
const CLASSES: usize = usize::BITS as usize + 1;

/// One class's bytes and blocks held, on a cache line of its own: the threads allocating
/// different sizes do not contend.
#[repr(align(64))]
struct Counter {
    bytes: AtomicUsize,
    blocks: AtomicUsize,
}

/// Per class, the bytes and the blocks [`Counting`] handed out and not yet freed.
static COUNTERS: [Counter; CLASSES] = [const {
    Counter {
        bytes: AtomicUsize::new(0),
        blocks: AtomicUsize::new(0),
    }
}; CLASSES];

fn class(size: usize) -> usize {
    (usize::BITS - size.leading_zeros()) as usize
}

fn held(size: usize) {
    let c = &COUNTERS[class(size)];
    c.bytes.fetch_add(size, Ordering::Relaxed);
    c.blocks.fetch_add(1, Ordering::Relaxed);
}

fn freed(size: usize) {
    let c = &COUNTERS[class(size)];
    c.bytes.fetch_sub(size, Ordering::Relaxed);
    c.blocks.fetch_sub(1, Ordering::Relaxed);
}

/// `p`, counted as held when the allocation succeeded.
fn made(p: *mut u8, size: usize) -> *mut u8 {
    if !p.is_null() {
        held(size);
    }
    p
}

/// A global allocator over `A` that counts the blocks and bytes the program holds ([`heap`]).
pub struct Counting<A>(pub A);

// SAFETY: every call is passed on to `A` unchanged, with the same layout and pointer; the
// counters only add and subtract the sizes of what `A` handed out and took back.
#[expect(unsafe_code, reason = "a global allocator is unsafe by definition")]
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        made(unsafe { self.0.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        made(unsafe { self.0.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.dealloc(ptr, layout) };
        freed(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // The old block is freed only when the new one was made.
            held(new_size);
            freed(layout.size());
        }
        p
    }
}

/// One size class of the live heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// Its smallest block size (its largest is twice that, less one).
    pub from: usize,
    /// Blocks held.
    pub blocks: usize,
    /// Bytes held.
    pub bytes: usize,
}

/// The heap at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heap {
    /// Bytes the program holds ([`Counting`]'s count; 0 without it).
    pub live: usize,
    /// The process's anonymous resident memory (RssAnon of `/proc/self/status`: its heap's
    /// pages, in use or kept by the allocator, thread stacks and other private mappings);
    /// `None` where the system does not say.
    pub anon: Option<usize>,
    /// The classes holding anything, the most bytes first.
    pub classes: Vec<Class>,
}

/// The heap now.
pub fn heap() -> Heap {
    let mut classes: Vec<Class> = COUNTERS
        .iter()
        .enumerate()
        .map(|(c, n)| Class {
            from: if c == 0 { 0 } else { 1 << (c - 1) },
            blocks: n.blocks.load(Ordering::Relaxed),
            bytes: n.bytes.load(Ordering::Relaxed),
        })
        .filter(|c| c.blocks > 0)
        .collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.bytes));
    Heap {
        live: classes.iter().map(|c| c.bytes).sum(),
        anon: std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| status_kib(&s, "RssAnon"))
            .and_then(|k| usize::try_from(k).ok())
            .map(|k| k.saturating_mul(1024)),
        classes,
    }
}

/// The KiB on the line `<name>: <number> kB` of a `/proc/<pid>/status` text (`None`: no
/// such line, or not a number of kB). The one reader of those lines: the bench and the lab
/// read their processes' with it too.
pub fn status_kib(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// The [`heap`] figures as Prometheus gauges, read at each scrape: `heap_live_bytes` and
/// `resident_anon_bytes` (under the registry's prefix; the second only where the system says).
#[derive(Debug, Default)]
pub struct HeapCollector;

impl Collector for HeapCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let h = heap();
        let gauges = [
            (
                "heap_live",
                "Bytes the program holds on its heap",
                Some(h.live),
            ),
            (
                "resident_anon",
                "The process's anonymous resident memory (heap pages in use or kept by the \
                 allocator, stacks)",
                h.anon,
            ),
        ];
        for (name, help, value) in gauges {
            let Some(value) = value else { continue };
            let g = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            let metric =
                encoder.encode_descriptor(name, help, Some(&Unit::Bytes), g.metric_type())?;
            g.encode(metric)?;
        }
        Ok(())
    }
}

/// How often [`report_heap`] looks at the heap, in the binaries.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);

/// How much the heap changes before [`report_heap`] logs it again.
pub const REPORT_CHANGE: usize = 1 << 20;

/// Whether `now` differs from the `last` line logged (live, anon) by at least
/// [`REPORT_CHANGE`] in either figure (or nothing was logged yet).
pub fn changed(last: Option<(usize, usize)>, now: &Heap) -> bool {
    last.is_none_or(|(live, anon)| {
        live.abs_diff(now.live) >= REPORT_CHANGE
            || anon.abs_diff(now.anon.unwrap_or(0)) >= REPORT_CHANGE
    })
}

/// The `n` classes holding the most, as `"<from>B+: <blocks> x, <KiB> KiB"`.
pub fn largest(h: &Heap, n: usize) -> String {
    h.classes
        .iter()
        .take(n)
        .map(|c| format!("{}B+: {} x, {} KiB", c.from, c.blocks, c.bytes / 1024))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Logs the heap every `every` when it changed by a MiB or more since its last line (a process
/// at rest logs nothing): where its memory is, next to its RSS, without a metrics endpoint.
pub async fn report_heap(every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = None;
    loop {
        tick.tick().await;
        let now = heap();
        if changed(last, &now) {
            last = Some((now.live, now.anon.unwrap_or(0)));
            tracing::info!(
                live_kib = now.live / 1024,
                anon_kib = now.anon.unwrap_or(0) / 1024,
                largest = %largest(&now, 5),
                "heap"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> usize {
        COUNTERS
            .iter()
            .map(|c| c.bytes.load(Ordering::Relaxed))
            .sum()
    }

    #[test]
    #[expect(unsafe_code, reason = "calling the allocator directly")]
    fn the_counting_allocator_counts_what_is_held_by_size_class() {
        let a = Counting(std::alloc::System);
        // This test binary's allocator is not Counting: only calls through `a` count.
        let before = live();
        let l = Layout::from_size_align(4096, 8).unwrap();
        // SAFETY: a valid layout; the block is freed below with the layout it has.
        let p = unsafe { a.alloc(l) };
        assert!(!p.is_null());
        assert_eq!(live() - before, 4096);
        let c = heap()
            .classes
            .into_iter()
            .find(|c| c.from == 4096)
            .expect("the 4096 B+ class");
        assert_eq!((c.blocks, c.bytes), (1, 4096));
        // SAFETY: `p` is `a`'s, of layout `l`; the new size is non-zero.
        let q = unsafe { a.realloc(p, l, 10_000) };
        assert!(!q.is_null());
        assert_eq!(live() - before, 10_000);
        assert!(
            heap().classes.iter().all(|c| c.from != 4096),
            "moved to 8192 B+"
        );
        // SAFETY: `q` is `a`'s, of 10,000 bytes at the same alignment.
        unsafe { a.dealloc(q, Layout::from_size_align(10_000, 8).unwrap()) };
        assert_eq!(live(), before);
        assert!(heap().classes.is_empty());
    }

    #[test]
    fn classes_are_powers_of_two() {
        assert_eq!(class(0), 0);
        assert_eq!(class(1), 1);
        assert_eq!((class(4095), class(4096), class(8191)), (12, 13, 13));
        assert_eq!(class(usize::MAX), CLASSES - 1);
        let h = Heap {
            live: 3 << 20,
            anon: None,
            classes: vec![
                Class {
                    from: 1 << 20,
                    blocks: 2,
                    bytes: 2 << 20,
                },
                Class {
                    from: 64,
                    blocks: 10_000,
                    bytes: 1 << 20,
                },
            ],
        };
        assert_eq!(
            largest(&h, 1),
            "1048576B+: 2 x, 2048 KiB",
            "the largest first, n of them"
        );
    }

    #[test]
    fn the_heap_is_logged_again_only_after_a_mib_of_change() {
        let h = |live, anon| Heap {
            live,
            anon: Some(anon),
            classes: Vec::new(),
        };
        assert!(changed(None, &h(0, 0)));
        let last = Some((10 << 20, 20 << 20));
        assert!(!changed(last, &h((10 << 20) + 1000, (20 << 20) - 1000)));
        assert!(changed(last, &h(11 << 20, 20 << 20)));
        assert!(changed(last, &h(10 << 20, 19 << 20)));
    }

    #[test]
    fn the_anonymous_memory_is_read_and_the_collector_exports_both() {
        assert_eq!(
            status_kib(
                "Name:\tx\nRssAnon:\t    6272 kB\nRssFile:\t 1 kB\n",
                "RssAnon"
            ),
            Some(6272)
        );
        assert_eq!(status_kib("RssAnon: many kB\n", "RssAnon"), None);
        assert_eq!(status_kib("VmRSS:\t1 kB\n", "RssAnon"), None);
        assert_eq!(status_kib("RssAnonX:\t1 kB\n", "RssAnon"), None);
        let anon = heap().anon.expect("RssAnon in /proc/self/status");
        assert!(anon > 0);
        let mut registry = prometheus_client::registry::Registry::with_prefix("t");
        registry.register_collector(Box::new(HeapCollector));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains("t_heap_live_bytes "), "{out}");
        let exported: i64 = out
            .lines()
            .find_map(|l| l.strip_prefix("t_resident_anon_bytes "))
            .expect(&out)
            .parse()
            .unwrap();
        assert!(exported > 0, "{out}");
    }
}

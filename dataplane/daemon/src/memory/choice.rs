//! The global allocator of the Kubernetes components, chosen once per process by
//! `LIQO_MALLOC`: `jemalloc` (the default, built in), `mimalloc` or `glibc` (the C library's
//! malloc). Each gives memory back as a worker parks ([`super::runtime`]).
//!
//! Why a choice, and why jemalloc first: after a burst of ten thousand pods, what an allocator
//! keeps is pages pinned by the few objects that outlive the burst (the latest Lease, a
//! status, a watch's buffer, made during the burst among its objects). jemalloc's slabs of
//! small blocks are a few 4 KiB pages and it returns what empties at once ([`JEMALLOC_OPTIONS`]:
//! one arena, no decay); mimalloc's pages are 64 KiB, purged only when wholly free; glibc's
//! arenas give back free 4 KiB pages when trimmed. Which keeps least depends on the workload,
//! so an operator (and the bench) can run another without a rebuild.
//!
//! It never changes its mind: the variable is read at the first allocation (with `getenv`,
//! which does not allocate), and every block is freed by the allocator that made it.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicU8, Ordering},
};

/// The environment variable that chooses.
pub const VARIABLE: &std::ffi::CStr = c"LIQO_MALLOC";

/// jemalloc's options in these binaries (its `malloc_conf`, read at its first allocation;
/// `_RJEM_MALLOC_CONF` in the environment adds to them, and wins): one arena (a second one
/// is a second set of partly used slabs after a burst; the work runs on one worker thread by
/// default) and dirty and muzzy pages returned at once (no decay: nothing waits for a later
/// allocation that an idle process does not make).
pub const JEMALLOC_OPTIONS: &std::ffi::CStr = c"narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0";

/// [`JEMALLOC_OPTIONS`] as jemalloc reads them: its `malloc_conf` (prefixed, as the built-in
/// jemalloc's symbols are), which replaces jemalloc's own empty (weak) one.
#[expect(unsafe_code, reason = "exporting jemalloc's configuration symbol")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: Option<&'static std::ffi::c_char> =
    // SAFETY: the pointer is to the first byte of a NUL-terminated literal, valid forever.
    Some(unsafe { &*JEMALLOC_OPTIONS.as_ptr() });

/// The allocators there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malloc {
    /// jemalloc, built in (the default).
    Jemalloc,
    /// mimalloc.
    Mimalloc,
    /// glibc's malloc, trimmed as workers park.
    Glibc,
}

impl Malloc {
    /// The allocator `value` names, if any: `jemalloc`, `mimalloc` or `glibc`.
    pub fn parse(value: &[u8]) -> Option<Malloc> {
        match value {
            b"jemalloc" => Some(Malloc::Jemalloc),
            b"mimalloc" => Some(Malloc::Mimalloc),
            b"glibc" => Some(Malloc::Glibc),
            _ => None,
        }
    }

    /// The allocator a value of [`VARIABLE`] chooses: the one it names; unset, or naming
    /// none, jemalloc ([`announce`] then refuses to go on).
    pub fn named(value: Option<&[u8]>) -> Malloc {
        value.and_then(Malloc::parse).unwrap_or(Malloc::Jemalloc)
    }

    /// Its number in [`CHOSEN`] (0 is "not chosen yet").
    const fn code(self) -> u8 {
        match self {
            Malloc::Jemalloc => 1,
            Malloc::Mimalloc => 2,
            Malloc::Glibc => 3,
        }
    }

    /// The allocator numbered `code` ([`Malloc::code`]), if any.
    const fn from_code(code: u8) -> Option<Malloc> {
        match code {
            1 => Some(Malloc::Jemalloc),
            2 => Some(Malloc::Mimalloc),
            3 => Some(Malloc::Glibc),
            _ => None,
        }
    }
}

/// 0: not chosen yet; else [`Malloc::code`].
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The allocator this process runs with (chosen at its first allocation).
pub fn chosen() -> Malloc {
    match Malloc::from_code(CHOSEN.load(Ordering::Relaxed)) {
        Some(m) => m,
        None => choose(),
    }
}

#[cold]
#[expect(
    unsafe_code,
    reason = "getenv: the only read of the environment that does not allocate; a volatile \
              read of the configuration symbol"
)]
fn choose() -> Malloc {
    // SAFETY: the name is a NUL-terminated literal; getenv returns NULL or a pointer to a
    // NUL-terminated string in the environment, read at once (the process's first
    // allocation, before its threads could change the environment).
    let value = unsafe {
        let p = nix::libc::getenv(VARIABLE.as_ptr());
        (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_bytes())
    };
    let want = Malloc::named(value);
    // jemalloc's configuration is ours only if the symbol is linked in: this read, which the
    // compiler may not remove, keeps it.
    // SAFETY: a read of an initialised static through a pointer to it; nothing writes it.
    unsafe { std::ptr::read_volatile(&raw const JEMALLOC_CONF) };
    // The first thread's choice stands (the same, unless the environment changed between).
    match CHOSEN.compare_exchange(0, want.code(), Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => want,
        Err(earlier) => Malloc::from_code(earlier).unwrap_or(want),
    }
}

/// A value of [`VARIABLE`] that names no allocator.
#[derive(Debug, thiserror::Error)]
#[error("LIQO_MALLOC={value:?} names no allocator (jemalloc, mimalloc or glibc)")]
pub struct UnknownMalloc {
    /// The value.
    pub value: String,
}

/// Logs the allocator chosen; refuses a [`VARIABLE`] that names none (the process ends with
/// that error before doing anything). Call once tracing is set up.
pub fn announce() -> Result<Malloc, UnknownMalloc> {
    let name = VARIABLE.to_string_lossy();
    if let Some(v) = std::env::var_os(&*name)
        && Malloc::parse(v.as_encoded_bytes()).is_none()
    {
        return Err(UnknownMalloc {
            value: v.to_string_lossy().into_owned(),
        });
    }
    let malloc = chosen();
    if malloc == Malloc::Jemalloc {
        // What jemalloc read (ours, and `_RJEM_MALLOC_CONF`'s): the log shows they took.
        match super::jemalloc::options() {
            Ok(options) => tracing::info!(?malloc, ?options, "allocator"),
            Err(error) => tracing::warn!(?malloc, %error, "allocator (options unknown)"),
        }
    } else {
        tracing::info!(?malloc, "allocator");
    }
    Ok(malloc)
}

/// The global allocator: jemalloc, mimalloc or glibc's, as [`chosen`].
pub struct Chosen;

// SAFETY: every call goes to the allocator chosen once for the process, so a block is freed
// and reallocated by the allocator that made it; each upholds GlobalAlloc's contract.
#[expect(unsafe_code, reason = "a GlobalAlloc passing each call on")]
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                Malloc::Jemalloc => tikv_jemallocator::Jemalloc.alloc(layout),
                Malloc::Mimalloc => mimalloc::MiMalloc.alloc(layout),
                Malloc::Glibc => System.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                Malloc::Jemalloc => tikv_jemallocator::Jemalloc.alloc_zeroed(layout),
                Malloc::Mimalloc => mimalloc::MiMalloc.alloc_zeroed(layout),
                Malloc::Glibc => System.alloc_zeroed(layout),
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on to the allocator that made `ptr`.
        unsafe {
            match chosen() {
                Malloc::Jemalloc => tikv_jemallocator::Jemalloc.dealloc(ptr, layout),
                Malloc::Mimalloc => mimalloc::MiMalloc.dealloc(ptr, layout),
                Malloc::Glibc => System.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on to the allocator that made `ptr`.
        unsafe {
            match chosen() {
                Malloc::Jemalloc => tikv_jemallocator::Jemalloc.realloc(ptr, layout, new_size),
                Malloc::Mimalloc => mimalloc::MiMalloc.realloc(ptr, layout, new_size),
                Malloc::Glibc => System.realloc(ptr, layout, new_size),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_chooses_its_allocator_and_jemalloc_is_the_default() {
        assert_eq!(VARIABLE.to_str(), Ok("LIQO_MALLOC"));
        assert_eq!(Malloc::parse(b"glibc"), Some(Malloc::Glibc));
        assert_eq!(Malloc::parse(b"mimalloc"), Some(Malloc::Mimalloc));
        assert_eq!(Malloc::parse(b"jemalloc"), Some(Malloc::Jemalloc));
        assert_eq!(Malloc::parse(b"tcmalloc"), None);
        assert_eq!(Malloc::named(None), Malloc::Jemalloc);
        assert_eq!(Malloc::named(Some(b"mimalloc")), Malloc::Mimalloc);
        assert_eq!(Malloc::named(Some(b"glibc")), Malloc::Glibc);
        assert_eq!(Malloc::named(Some(b"GLIBC ")), Malloc::Jemalloc);
        for m in [Malloc::Jemalloc, Malloc::Mimalloc, Malloc::Glibc] {
            assert_eq!(Malloc::from_code(m.code()), Some(m));
        }
        assert_eq!(Malloc::from_code(0), None, "0 is not chosen yet");
    }

    #[test]
    fn blocks_round_trip_through_the_chosen_allocator() {
        let layout = Layout::from_size_align(100, 16).unwrap();
        // SAFETY: a non-zero layout; the block is written within it, grown, then freed.
        #[expect(unsafe_code, reason = "calling the allocator directly")]
        unsafe {
            let p = Chosen.alloc_zeroed(layout);
            assert!(!p.is_null());
            assert_eq!(*p.add(99), 0);
            *p = 7;
            let q = Chosen.realloc(p, layout, 4000);
            assert_eq!(*q, 7);
            Chosen.dealloc(q, Layout::from_size_align(4000, 16).unwrap());
        }
        assert_eq!(chosen(), chosen());
        // Every allocator, directly: the same round trip.
        for m in [Malloc::Jemalloc, Malloc::Mimalloc, Malloc::Glibc] {
            let a: &dyn GlobalAlloc = match m {
                Malloc::Jemalloc => &tikv_jemallocator::Jemalloc,
                Malloc::Mimalloc => &mimalloc::MiMalloc,
                Malloc::Glibc => &System,
            };
            // SAFETY: as above, with `a`'s own blocks.
            #[expect(unsafe_code, reason = "calling the allocator directly")]
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!(!p.is_null(), "{m:?}");
                *p = 9;
                let q = a.realloc(p, layout, 70_000);
                assert_eq!(*q, 9, "{m:?}");
                a.dealloc(q, Layout::from_size_align(70_000, 16).unwrap());
            }
        }
    }
}

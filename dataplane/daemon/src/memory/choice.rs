//! The global allocator of the Kubernetes components, chosen once per process by
//! `LIQO_MALLOC`: `mimalloc` (the default) or `glibc` (the C library's malloc, whose free
//! pages a worker gives back with `malloc_trim` as it parks: [`super::runtime`]).
//!
//! Why a choice: after a burst of ten thousand pods, what an allocator keeps is pages pinned by
//! the few objects that outlive the burst. mimalloc's pages are 64 KiB, glibc's unit of return
//! is the 4 KiB page; which keeps less depends on the workload, so an operator (and the bench)
//! can run either without a rebuild.
//!
//! It never changes its mind: the variable is read at the first allocation (with `getenv`,
//! which does not allocate), and every block is freed by the allocator that made it.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicU8, Ordering},
};

/// The environment variable that chooses.
pub const VARIABLE: &std::ffi::CStr = c"LIQO_MALLOC";

/// The allocators there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malloc {
    /// mimalloc (the default).
    Mimalloc,
    /// glibc's malloc, trimmed as workers park.
    Glibc,
}

impl Malloc {
    /// The allocator `value` names, if any: `mimalloc` or `glibc`.
    pub fn parse(value: &[u8]) -> Option<Malloc> {
        match value {
            b"mimalloc" => Some(Malloc::Mimalloc),
            b"glibc" => Some(Malloc::Glibc),
            _ => None,
        }
    }

    /// The allocator a value of [`VARIABLE`] chooses: the one it names; unset, or naming
    /// none, mimalloc ([`announce`] then refuses to go on).
    pub fn named(value: Option<&[u8]>) -> Malloc {
        value.and_then(Malloc::parse).unwrap_or(Malloc::Mimalloc)
    }
}

/// 0: not chosen yet; 1: mimalloc; 2: glibc.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The allocator this process runs with (chosen at its first allocation).
pub fn chosen() -> Malloc {
    match CHOSEN.load(Ordering::Relaxed) {
        1 => Malloc::Mimalloc,
        2 => Malloc::Glibc,
        _ => choose(),
    }
}

#[cold]
#[expect(
    unsafe_code,
    reason = "getenv: the only read of the environment that does not allocate"
)]
fn choose() -> Malloc {
    // SAFETY: the name is a NUL-terminated literal; getenv returns NULL or a pointer to a
    // NUL-terminated string in the environment, read at once (the process's first
    // allocation, before its threads could change the environment).
    let value = unsafe {
        let p = nix::libc::getenv(VARIABLE.as_ptr());
        (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_bytes())
    };
    let want = match Malloc::named(value) {
        Malloc::Mimalloc => 1,
        Malloc::Glibc => 2,
    };
    // The first thread's choice stands (the same, unless the environment changed between).
    let got = match CHOSEN.compare_exchange(0, want, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => want,
        Err(earlier) => earlier,
    };
    if got == 2 {
        Malloc::Glibc
    } else {
        Malloc::Mimalloc
    }
}

/// A value of [`VARIABLE`] that names no allocator.
#[derive(Debug, thiserror::Error)]
#[error("LIQO_MALLOC={value:?} names no allocator (mimalloc or glibc)")]
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
    tracing::info!(?malloc, "allocator");
    Ok(malloc)
}

/// The global allocator: mimalloc or glibc's, as [`chosen`].
pub struct Chosen;

// SAFETY: every call goes to the allocator chosen once for the process, so a block is freed
// and reallocated by the allocator that made it; both uphold GlobalAlloc's contract.
#[expect(unsafe_code, reason = "a GlobalAlloc passing each call on")]
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                Malloc::Mimalloc => mimalloc::MiMalloc.alloc(layout),
                Malloc::Glibc => System.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                Malloc::Mimalloc => mimalloc::MiMalloc.alloc_zeroed(layout),
                Malloc::Glibc => System.alloc_zeroed(layout),
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on to the allocator that made `ptr`.
        unsafe {
            match chosen() {
                Malloc::Mimalloc => mimalloc::MiMalloc.dealloc(ptr, layout),
                Malloc::Glibc => System.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on to the allocator that made `ptr`.
        unsafe {
            match chosen() {
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
    fn only_glibc_chooses_glibc() {
        assert_eq!(VARIABLE.to_str(), Ok("LIQO_MALLOC"));
        assert_eq!(Malloc::parse(b"glibc"), Some(Malloc::Glibc));
        assert_eq!(Malloc::parse(b"mimalloc"), Some(Malloc::Mimalloc));
        assert_eq!(Malloc::parse(b"jemalloc"), None);
        assert_eq!(Malloc::named(None), Malloc::Mimalloc);
        assert_eq!(Malloc::named(Some(b"mimalloc")), Malloc::Mimalloc);
        assert_eq!(Malloc::named(Some(b"glibc")), Malloc::Glibc);
        assert_eq!(Malloc::named(Some(b"GLIBC ")), Malloc::Mimalloc);
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
    }
}

//! The built-in jemalloc's control interface (`mallctl`) as the runtime uses it: a worker's
//! thread cache flushed and the arenas purged as it parks ([`super::runtime`]), and the
//! options it runs with read back (logged at startup: [`super::choice::announce`]).
//!
//! It calls jemalloc only through `mallctl` (an error's name is its one heap allocation) and
//! never changes an option: the options are
//! [`super::choice::JEMALLOC_OPTIONS`] and the environment's.

use std::ffi::{CStr, c_void};

/// A `mallctl` call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jemalloc's mallctl({name:?}) failed with error {code}")]
pub struct MallctlError {
    /// The name called.
    pub name: String,
    /// What jemalloc returned (an errno value).
    pub code: i32,
}

fn checked(name: &CStr, code: i32) -> Result<(), MallctlError> {
    if code == 0 {
        Ok(())
    } else {
        Err(MallctlError {
            name: name.to_string_lossy().into_owned(),
            code,
        })
    }
}

/// Calls `name`, which reads and writes nothing (an action).
#[expect(unsafe_code, reason = "mallctl is jemalloc's C API")]
fn act(name: &CStr) -> Result<(), MallctlError> {
    // SAFETY: a NUL-terminated name; no old or new value (all null pointers, length 0), as
    // the actions called here take.
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    checked(name, code)
}

/// A plain integer, valid whatever bytes jemalloc writes into it: the values read here.
trait Integer: Copy + Default {}
#[cfg(test)]
impl Integer for u8 {}
impl Integer for std::ffi::c_uint {}
impl Integer for nix::libc::ssize_t {}

/// Reads `name`, whose value is a `T` (jemalloc checks the length).
#[expect(unsafe_code, reason = "mallctl is jemalloc's C API")]
fn read<T: Integer>(name: &CStr) -> Result<T, MallctlError> {
    let mut value = T::default();
    let mut len = size_of::<T>();
    // SAFETY: `value` is an integer of `len` bytes, valid for any bytes. jemalloc writes at
    // most `len` bytes: its value's size when that is `len`, else the smaller of the two, and
    // then returns EINVAL (an error here, the partial value dropped).
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            (&raw mut value).cast::<c_void>(),
            &raw mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    checked(name, code).map(|()| value)
}

/// Returns the calling thread's cached blocks to their arena (a slab they kept from emptying
/// can then be purged). A thread without a cache (`tcache:false` in `_RJEM_MALLOC_CONF`, for
/// which jemalloc answers EFAULT) has nothing to flush.
pub fn flush_thread_cache() -> Result<(), MallctlError> {
    match act(c"thread.tcache.flush") {
        Err(e) if e.code == nix::libc::EFAULT => Ok(()),
        done => done,
    }
}

/// Purges every arena's unused dirty and muzzy pages (gives them back to the system); 4096 is
/// jemalloc 5's `MALLCTL_ARENAS_ALL`, the index meaning every arena.
pub fn purge() -> Result<(), MallctlError> {
    act(c"arena.4096.purge")
}

/// The options jemalloc runs with (what it read from its configuration and the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Arenas (besides the one jemalloc makes for blocks of 8 MiB and more, which keeps no
    /// unused pages).
    pub narenas: std::ffi::c_uint,
    /// How long unused dirty pages are kept before they are purged (ms; -1: never).
    pub dirty_decay_ms: nix::libc::ssize_t,
    /// How long muzzy pages are kept (ms; -1: never).
    pub muzzy_decay_ms: nix::libc::ssize_t,
}

/// The options jemalloc runs with.
pub fn options() -> Result<Options, MallctlError> {
    Ok(Options {
        narenas: read(c"opt.narenas")?,
        dirty_decay_ms: read(c"opt.dirty_decay_ms")?,
        muzzy_decay_ms: read(c"opt.muzzy_decay_ms")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_jemalloc_runs_with_our_options_and_flushes_and_purges() {
        // The configuration symbol is this crate's (`choice`): read back as jemalloc parsed it
        // (the test runs without `_RJEM_MALLOC_CONF`, which would add to it).
        assert_eq!(
            options(),
            Ok(Options {
                narenas: 1,
                dirty_decay_ms: 0,
                muzzy_decay_ms: 0
            })
        );
        assert_eq!(flush_thread_cache(), Ok(()));
        assert_eq!(purge(), Ok(()));
        // A name jemalloc does not know: its error, naming it.
        let err = act(c"thread.no.such").unwrap_err();
        assert_eq!(err.name, "thread.no.such");
        assert_ne!(err.code, 0);
        assert!(err.to_string().contains("thread.no.such"), "{err}");
        // A value of the wrong size is refused, not written past.
        assert!(read::<u8>(c"opt.narenas").is_err());
    }
}

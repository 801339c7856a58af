//! The tokio runtime of the binaries whose global allocator is [`Chosen`] (the
//! controller-manager and the virtual kubelet): multi-threaded, and each worker thread, as it
//! parks (goes idle), gives memory back, at most once a second per thread. With jemalloc (the
//! default, [`choice`]) it returns its thread cache's blocks to the arena ([`jemalloc`]) and,
//! at most once every ten seconds, purges the arenas (with [`choice::JEMALLOC_OPTIONS`]
//! jemalloc already purges as pages empty: this covers options set in the environment); with
//! mimalloc (`LIQO_MALLOC=mimalloc`) it asks it to collect its pages (forced, which also takes
//! back what other threads abandoned, every ten seconds); with glibc's (`LIQO_MALLOC=glibc`)
//! it trims every arena (`malloc_trim`) at the forced collects' cadence.
//!
//! Why: an allocator frees a thread's cached blocks and empty pages, and returns them to the
//! system, only when that thread allocates or collects again. A worker that went idle after
//! ten thousand objects were freed (the objects of deleted pods, often freed on another
//! thread) kept their pages, and the process did not come back to its idle memory. Parking is
//! the moment it has nothing else to do. mimalloc's purge delay is 0 (instead of a second): a
//! collect gives the pages back at once, not at a later collect that an idle thread may never
//! make.
//!
//! It also counts the heap ([`heap`]: what the program holds, by size, beside the process's
//! anonymous resident memory).
//!
//! It never sets the global allocator: a binary declares its own (`Counting(Chosen)`). A binary
//! that does not should not run [`runtime`]: a collect finds nothing of its own to free (with
//! jemalloc, the default choice, its first one starts up a jemalloc the binary never
//! allocates from) and [`heap`]'s live bytes are 0.

use std::{
    cell::Cell,
    time::{Duration, Instant},
};

pub mod choice;
pub mod heap;
pub mod jemalloc;

pub use choice::{Chosen, Malloc, chosen};
pub use heap::{Counting, Heap, HeapCollector, REPORT_EVERY, heap, report_heap, status_kib};

/// The least time between two collects on one thread.
pub const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// The least time between two forced collects on one thread: jemalloc's purge of every arena,
/// mimalloc's collect that also frees what other threads abandoned and the emptied segments,
/// glibc's `malloc_trim` (each a walk of the whole heap, kept rare).
pub const FORCE_EVERY: Duration = Duration::from_secs(10);

/// `mi_option_purge_delay` in `mimalloc.h`'s `mi_option_e` (the same in v2 and v3; the
/// bindings do not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

thread_local! {
    static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    static LAST_FORCED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Whether a thread that last collected at `last` collects at `now`.
pub fn due(last: Option<Instant>, now: Instant) -> bool {
    due_every(last, now, COLLECT_EVERY)
}

fn due_every(last: Option<Instant>, now: Instant, every: Duration) -> bool {
    last.is_none_or(|l| now.saturating_duration_since(l) >= every)
}

/// Whether a failed jemalloc call was logged (once per process: a park comes every few
/// milliseconds under load).
static JEMALLOC_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[expect(
    unsafe_code,
    reason = "mi_collect and malloc_trim are the allocators' C API"
)]
fn on_park() {
    let now = Instant::now();
    if due(LAST.get(), now) {
        LAST.set(Some(now));
        let force = due_every(LAST_FORCED.get(), now, FORCE_EVERY);
        if force {
            LAST_FORCED.set(Some(now));
        }
        match chosen() {
            Malloc::Jemalloc => {
                // Each on its own: a failed flush does not keep the arenas from the purge.
                let flushed = jemalloc::flush_thread_cache();
                let purged = if force { jemalloc::purge() } else { Ok(()) };
                if let Some(error) = flushed.err().or(purged.err())
                    && !JEMALLOC_FAILED.swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::warn!(%error, "memory is not given back as workers park");
                }
            }
            // SAFETY: mi_collect walks the calling thread's own heap and, forced, also takes
            // back pages other threads abandoned and purges the shared arenas (under
            // mimalloc's own locks); it takes no pointer and may be called at any time from any
            // thread.
            Malloc::Mimalloc => unsafe { libmimalloc_sys::mi_collect(force) },
            // Walking every arena is the forced collect's cadence.
            Malloc::Glibc if force => {
                // SAFETY: malloc_trim takes each arena's lock and gives back the free pages of
                // its free chunks (madvise); it takes no pointer.
                unsafe { nix::libc::malloc_trim(0) };
            }
            Malloc::Glibc => {}
        }
    }
}

/// Sets mimalloc's purge delay to 0 once per process, unless `MIMALLOC_PURGE_DELAY` chose one
/// (or another allocator runs).
fn purge_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() && chosen() == Malloc::Mimalloc {
        mimalloc_purges_at_once();
    }
}

/// Sets mimalloc's purge delay to 0 (once per process).
#[expect(unsafe_code, reason = "mi_option_set is mimalloc's C API")]
fn mimalloc_purges_at_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: setting an option takes no pointer; `mi_option_set` is not thread-safe, so
        // it runs once, before the runtime's threads start (`runtime` calls it first).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    });
}

/// How many worker threads run a binary's work (its `--worker-threads` flag).
///
/// One by default: a controller-manager or a virtual kubelet used 8-10% of a CPU while 10,000
/// pods were created, and each worker thread keeps allocator state of its own after a burst
/// (with mimalloc, which gives each thread its own heap, two workers held 0.8 MiB more in a
/// virtual kubelet whose 1,000 pods were deleted, 1 MiB more in a controller-manager; with
/// jemalloc's one arena a thread keeps only its cache, flushed as it parks). More threads are
/// for a process that has the CPUs and keeps one busy.
#[derive(Debug, Clone, Copy, clap::Args)]
// This doc is not the binaries' `--help` text (their own descriptions are).
#[command(about = None, long_about = None)]
pub struct Workers {
    /// Worker threads running the process's work (the thread that starts them only waits).
    #[arg(long = "worker-threads", default_value = "1")]
    pub threads: std::num::NonZeroUsize,
}

/// Whether the `--help` of `command` (a binary's flags, [`Workers`] flattened in) opens with
/// `description`, the program's own, and has no long description a flattened group lent it
/// (an error saying what it has instead).
pub fn help_opens_with(command: &clap::Command, description: &str) -> Result<(), String> {
    let about = command.get_about().map(ToString::to_string);
    let long = command.get_long_about().map(ToString::to_string);
    if about.as_deref() == Some(description) && long.is_none() {
        Ok(())
    } else {
        Err(format!(
            "--help opens with {about:?} (long {long:?}), not {description:?}"
        ))
    }
}

/// A multi-threaded runtime of `workers` worker threads (all drivers enabled), which give
/// memory back as they park (mimalloc, when chosen, purging what they free at once).
pub fn runtime(workers: Workers) -> std::io::Result<tokio::runtime::Runtime> {
    purge_at_once();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.threads.get())
        .enable_all()
        .on_thread_park(on_park)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_collects_at_most_once_a_second() {
        let t0 = Instant::now();
        assert!(due(None, t0));
        assert!(!due(Some(t0), t0 + Duration::from_millis(999)));
        assert!(due(Some(t0), t0 + COLLECT_EVERY));
        // Forced: at most once every FORCE_EVERY.
        assert!(due_every(None, t0, FORCE_EVERY));
        assert!(!due_every(
            Some(t0),
            t0 + Duration::from_secs(9),
            FORCE_EVERY
        ));
        assert!(due_every(Some(t0), t0 + FORCE_EVERY, FORCE_EVERY));
    }

    #[test]
    #[expect(unsafe_code, reason = "reading mimalloc's options back")]
    fn the_purge_delay_is_set_to_zero() {
        // This test binary's allocator is not `Chosen`: the setting is made directly.
        mimalloc_purges_at_once();
        // SAFETY: reading an option takes no pointer.
        let (delay, version) = unsafe {
            (
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
                libmimalloc_sys::mi_version(),
            )
        };
        assert_eq!(delay, 0);
        // The option's number is from mimalloc 2.x and 3.x's header (version 2xxyy, 3xxyy).
        assert!((20000..40000).contains(&version), "mimalloc {version}");
    }

    #[test]
    fn a_help_opens_with_the_programs_description_alone() {
        use clap::{Args as _, Command};
        let own = Workers::augment_args(Command::new("p")).about("the program");
        assert_eq!(help_opens_with(&own, "the program"), Ok(()));
        let err = help_opens_with(&own, "another").unwrap_err();
        assert!(
            err.contains("\"the program\"") && err.contains("\"another\""),
            "{err}"
        );
        assert!(help_opens_with(&own.clone().long_about("lent"), "the program").is_err());
        assert!(help_opens_with(&Command::new("p"), "the program").is_err());
    }

    #[test]
    fn the_runtime_runs_its_workers_and_they_collect_when_idle() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            workers: Workers,
        }
        // One worker by default; the flag names more; 0 is refused, naming the flag.
        assert_eq!(Cli::parse_from(["x"]).workers.threads.get(), 1);
        let two = Cli::parse_from(["x", "--worker-threads", "2"]).workers;
        let zero = Cli::try_parse_from(["x", "--worker-threads", "0"])
            .err()
            .unwrap();
        assert!(zero.to_string().contains("--worker-threads"), "{zero}");
        let rt = runtime(two).unwrap();
        assert_eq!(rt.metrics().num_workers(), 2);
        let n = rt.block_on(async {
            let v: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 1000 + i]).collect();
            tokio::time::sleep(Duration::from_millis(20)).await;
            v.len()
        });
        assert_eq!(n, 1000);
    }
}

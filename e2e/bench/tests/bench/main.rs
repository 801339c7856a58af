//! The benches' quick runs through `liqo-lab bench`, one binary (root): `bench tunnel`, `bench
//! path`, `bench peers` and `bench peering` (`bench_root`), `bench offload` (`bench_offload`).
//! Each checks its report's shape and that nothing is left, not figures (those are the
//! benches' own, by hand). They measure and build whole beds, so they run one at a time.

mod bench_offload;
mod bench_root;

use std::sync::{Mutex, MutexGuard};

static MACHINE: Mutex<()> = Mutex::new(());

/// Held by each bench for its whole run (a failed one's poisoned lock is taken anyway).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|p| p.into_inner())
}

//! The benches' quick runs through `liqo-bench`, one binary (root): `tunnel`, `path`, `peers`
//! and `peering` (`bench_root`), `offload` (`bench_offload`).
//! Each checks its report's shape and that nothing is left, not figures (those are the
//! benches' own, by hand). They measure and build whole beds, so they run one at a time.

mod bench_offload;
mod bench_root;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Mutex, MutexGuard},
};

use serde::de::DeserializeOwned;

static MACHINE: Mutex<()> = Mutex::new(());

/// Held by each bench for its whole run (a failed one's poisoned lock is taken anyway).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The report of `liqo-bench --prefix <prefix> <args> [--cache <cache>] -o json`, which must
/// succeed.
fn run_json<T: DeserializeOwned>(prefix: &str, args: &[&str], cache: Option<&Path>) -> T {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_liqo-bench"));
    cmd.args(["--prefix", prefix]).args(args);
    if let Some(cache) = cache {
        cmd.arg("--cache").arg(cache);
    }
    let out = cmd.args(["-o", "json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The bench's own set of the test kit's clusters, `name`, is gone: processes and files.
fn assert_clusters_gone(name: &str) {
    let dir = PathBuf::from(e2e::k8s::ROOT).join(name);
    assert!(!dir.exists(), "{} left behind", dir.display());
    let left = Command::new("pgrep")
        .args(["-f", &dir.display().to_string()])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "processes left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

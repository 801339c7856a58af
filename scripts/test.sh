#!/usr/bin/env bash
# Runs every check and test: formatting, lints, the build, unit tests (no root), then the
# privileged tests (real network namespaces, links, nftables, packets and Kubernetes control
# planes; they need root and fail without it), then the leftover check. Every phase and every
# integration test binary is timed; the table is printed at the end and appended to
# $LIQO_TIMINGS (tab-separated: phase, seconds, status) when that is set. Why each failed test
# binary failed (its panics) goes to $LIQO_TIMINGS.failures, cleared at the start, and is
# printed last (scripts/timing.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never
# One build from scratch: incremental caches would only double the target directory's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
. scripts/timing.sh
. scripts/lanes.sh
# Run alone, it prints its timing table when it ends (also after a failure); under .ci/run,
# that prints the table with the install added.
scratch=$(mktemp -d)
# Test binaries still running when this ends (interrupted, or an error of the script's own)
# are stopped rather than left running. A stopped test binary runs no destructors: what it made
# stays. The next run's leftover check does not report it (it was there before that run's
# tests), but its snapshot prints its namespaces, directories, processes and nftables tables
# (not its root-namespace links); remove it by hand, or with `liqo-lab down` / `liqo-lab k8s
# down` for the lab's and the kit's.
stop_jobs() {
  local j
  # The test binaries: named, with the end of their output (scripts/lanes.sh).
  lanes_stop
  j=$(jobs -p)
  # One may end between `jobs` and `kill`: nothing left to stop is not an error.
  [ -z "$j" ] || kill $j 2>/dev/null || true
}
if [ -z "${LIQO_TIMINGS:-}" ]; then
  LIQO_TIMINGS="$scratch/timings"
  export LIQO_TIMINGS
  trap 'stop_jobs; print_timings; print_failures; rm -rf "$scratch"' EXIT
else
  trap 'stop_jobs; rm -rf "$scratch"' EXIT
fi

# Failures of an earlier run under the same LIQO_TIMINGS are not this run's.
rm -f "$LIQO_TIMINGS.failures" "$LIQO_TIMINGS.failures.short"
status=0
phase "fmt" cargo fmt --all -- --check
# No import cycle among the crates (every dependency kind) or among any crate's modules.
phase "import cycles" python3 scripts/cycles.py
# Lints and the build in one pass: clippy-driver compiles the workspace's crates (as
# `cargo clippy` runs it, through RUSTC_WORKSPACE_WRAPPER) with its lints denied, so every
# crate is analysed once and the dependencies are compiled once, not checked for clippy and
# then compiled again for the tests (a separate `cargo clippy` took 240 s of a 1,900 s run).
# Every target (`--all-targets`, as `cargo clippy --all-targets`: the benches too) is built;
# the phases below time running, not compiling. The unit tests' cargo gets the same two
# variables, so it reuses this build; nothing else does (the Kubernetes build, the tests).
# What it changes in the tests' code: clippy-driver compiles the workspace's crates with MIR
# optimizations off and without the debug build's null and alignment checks of raw pointer
# reads (in our `unsafe` blocks); the dependencies are compiled by rustc as usual. A plain
# `cargo test` afterwards builds the workspace's crates again, apart (other file names).
# (python3 reads cargo's JSON: .ci/install provides it.)
clippy_driver="$("${RUSTC:-rustc}" --print sysroot)/bin/clippy-driver"
if [ ! -x "$clippy_driver" ]; then
  echo "error: $clippy_driver is missing: rustup component add clippy" >&2
  exit 1
fi
# clippy-driver's arguments, as cargo-clippy passes `-- -D warnings`.
clippy_args="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
export LIQO_TEST_EXES="$scratch/test-executables"
RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS="$clippy_args" \
  phase "clippy + build (tests)" build_tests "$LIQO_TEST_EXES" --workspace --locked --all-targets
# A failed unit test fails the run, after the system tests have run too; its panics close the
# run's output with the integration tests' (scripts/timing.sh's record_failure).
unit_tests() {
  RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS="$clippy_args" \
    cargo test --workspace --locked --lib --bins 2>&1 | tee "$scratch/unit-tests.log"
}
phase "unit tests" unit_tests || {
  rc=$?
  status=1
  record_failure "unit tests (cargo test --lib --bins)" "$rc" "$scratch/unit-tests.log"
}
if [ "$(id -u)" -ne 0 ]; then
  echo "error: the privileged tests need root; run: sudo bash scripts/test.sh" >&2
  exit 1
fi
echo "== Kubernetes control-plane binaries (built once from the Go module proxy, then cached)"
LIQO_K8S_BIN=$(phase_quiet "Kubernetes binaries" bash e2e/k8s/build.sh | tail -n1)
export LIQO_K8S_BIN
# The real nodes' kubelet, kube-proxy, containerd, runc and CoreDNS (the real-node lab test).
LIQO_K8S_NODE_BIN=$(phase_quiet "Kubernetes node binaries" bash e2e/k8s/build.sh node | tail -n1)
export LIQO_K8S_NODE_BIN
snapshot="$scratch/before-tests"
bash scripts/leftovers.sh snapshot "$snapshot"
echo "== integration tests (root: network namespaces, real packets, real API servers)"
# In lanes (scripts/lanes.sh: what runs alone and why); every binary runs even after a
# failure, so one run shows every failure; each binary's seconds go to the table.
mkdir "$scratch/lanes"
phase_quiet "integration tests" run_binaries "$LIQO_TEST_EXES" "$scratch/lanes" || status=1
phase "leftover check" bash scripts/leftovers.sh check "$snapshot" || status=1
exit "$status"

#!/usr/bin/env bash
# Runs every check and test: formatting, lints, unit tests (no root), then the privileged tests
# (real network namespaces, links, nftables and packets; they need root and fail without it).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TERM_COLOR=never
# One build from scratch: incremental caches would only double the target directory's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== unit tests (no root needed)"
cargo test --workspace --locked --lib --bins
echo "== privileged tests (root: network namespaces on the real kernel)"
if [ "$(id -u)" -ne 0 ]; then
  echo "error: the privileged tests need root; run: sudo bash scripts/test.sh" >&2
  exit 1
fi
echo "== Kubernetes control-plane binaries (built once from the Go module proxy, then cached)"
LIQO_K8S_BIN=$(bash e2e/k8s/build.sh | tail -n1)
export LIQO_K8S_BIN
cargo test --workspace --locked --no-fail-fast --test '*'

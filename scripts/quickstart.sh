#!/usr/bin/env bash
# The main job: installs what is missing, builds liqo-lab and runs its quickstart. Needs root:
# run it as root (`bash scripts/quickstart.sh`); as another user it asks sudo for root itself,
# keeping the caller's Rust toolchain; without sudo it says to run it as root.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    echo "== not root: asking sudo for root"
    exec sudo env "PATH=$PATH" "CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}" \
      "RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}" ${CARGO_TARGET_DIR:+"CARGO_TARGET_DIR=$CARGO_TARGET_DIR"} \
      bash "$(readlink -f "$0")" "$@"
  fi
  echo "error: the quickstart needs root (it creates network namespaces) and sudo is not installed: run it as root" >&2
  exit 1
fi
# Re-run through sudo by a user: give the files the build writes (target/, the cargo registry)
# back to that user afterwards, so their own cargo can use them again.
give_back() {
  [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ] || return 0
  local owner="$SUDO_UID:${SUDO_GID:-$SUDO_UID}" dirs=("$target_dir")
  # Only a cargo home that is the user's own (never root's).
  if [ -n "${CARGO_HOME:-}" ] && [ "$(stat -c %u "$CARGO_HOME" 2>/dev/null)" = "$SUDO_UID" ]; then
    dirs+=("$CARGO_HOME")
  fi
  chown -R "$owner" "${dirs[@]}" || echo "warning: could not give ${dirs[*]} back to uid $SUDO_UID" >&2
}
cd "$(dirname "$0")/.."
echo "== checking the packages the lab needs (installs what is missing)"
bash .ci/install
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
# The quickstart profile (Cargo.toml): the packet path fully optimized, the control plane
# lightly, so that a first build on 2 cores leaves time for the rest. Every program the lab and
# the chart's images run; not the benches' driver.
echo "== building the binaries (profile quickstart; about 12 minutes the first time on 2 cores)"
. scripts/mold.sh
# Where cargo puts them: CARGO_TARGET_DIR, a config's build.target-dir, else target/.
target_dir=$(cargo metadata --no-deps --locked --format-version 1 |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
cargo build --profile quickstart --locked --workspace --exclude liqo-bench --bins
give_back
# The manual's quick start on real nodes: two clusters whose nodes run kubelets and containerd,
# Liqo, peering, an offloaded demo answering from both clusters. Builds the Kubernetes binaries
# the first time (Go module proxy; cached in /var/cache/liqo-lab).
exec "$target_dir/quickstart/liqo-lab" "$@" quickstart --k8s --real-nodes

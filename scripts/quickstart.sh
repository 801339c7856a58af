#!/usr/bin/env bash
# The main demo: installs what is missing, builds liqo-lab and runs its quickstart. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install >/dev/null
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked -q --bins
exec ./target/release/liqo-lab "$@" quickstart

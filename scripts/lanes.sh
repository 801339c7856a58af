# Running the integration test executables, sourced by scripts/test.sh (after scripts/timing.sh).
#
# Most of a system test's time is waiting (API servers converging, processes starting, packets
# timing out): one binary at a time left half of the 2 cores idle. So the binaries run in lanes,
# LIQO_LANES at a time (default 2), the slowest known first so that the last one to end starts
# early. Tests inside a binary already run in parallel and every test works under its own
# prefix, so binaries never share a namespace, a cluster or a directory.
#
# Binaries that measure the machine or load all of it (benches, floods, CPU affinity) run
# first, one at a time, with nothing else running: under load they would measure the load.

# Test target names (tests/<name>/main.rs) that run alone, and why.
LANES_ALONE=(
  bench        # the benches' quick runs: they measure, and build whole beds
  gateway_load # floods at 20,000 handshakes/s and per-CPU lanes: they need the CPUs to themselves
  lab_on_k8s   # whole labs holding earlier issues' time targets (first cross-cluster packet
               # <= 10 s after `liqoctl peer`, <= 5 s without traffic during a key rotation):
               # beside another binary, 10.3 s once
)
# Test target names in the order they start when a lane is free (seconds in a CI run of
# fa96c61 with one lane: 250, 209, 106, 93, 70, 56, 24, 21); the others follow in build order.
LANES_SLOW_FIRST=(k8s manager liqoctl virtual_kubelet lab gateway netops auth)

# run_binaries TSV: runs every executable listed in TSV (build_tests' format) in its package's
# directory, as cargo test does; prints each one's whole output when it ends (outputs never
# interleave) and records "test <package>/<source>" with its seconds and status. Every binary
# runs even after a failure, so one run shows every failure. Returns 1 if any failed.
run_binaries() {
  local tsv=$1 lanes=${LIQO_LANES:-2} logs line name failed=0
  [[ "$lanes" =~ ^[1-9][0-9]*$ ]] || { echo "error: LIQO_LANES=$lanes is not a positive number" >&2; return 2; }
  logs=$(mktemp -d)
  local -a alone=() first=() rest=()
  for name in "${LANES_ALONE[@]}"; do
    line=$(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
    [ -n "$line" ] && alone+=("$line")
  done
  for name in "${LANES_SLOW_FIRST[@]}"; do
    line=$(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
    [ -n "$line" ] && first+=("$line")
  done
  while IFS= read -r line; do
    name=$(cut -f4 <<<"$line")
    [[ " ${LANES_ALONE[*]} ${LANES_SLOW_FIRST[*]} " == *" $name "* ]] || rest+=("$line")
  done <"$tsv"

  local -A started=() shown=() log_of=()
  local pid rc exe pkg dir tname src n=0
  # launch LINE: starts it in the background and records it under its pid.
  launch() {
    IFS=$'\t' read -r exe pkg dir tname src <<<"$1"
    n=$((n + 1))
    local t0=$EPOCHREALTIME
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" CARGO_PKG_NAME="$pkg" exec "$exe") \
      </dev/null >"$logs/$n.log" 2>&1 &
    pid=$!
    started[$pid]=$t0
    shown[$pid]="$pkg/$src (${exe##*/})"
    log_of[$pid]="$logs/$n.log"
  }
  # finish PID STATUS: prints its whole output and records its seconds and status.
  finish() {
    echo "     Running ${shown[$1]}"
    cat "${log_of[$1]}"
    record_phase "test ${shown[$1]% (*}" "${started[$1]}" "$2"
    [ "$2" -eq 0 ] || failed=1
    unset "started[$1]" "shown[$1]" "log_of[$1]"
  }
  # reap: waits for any running binary to end and finishes it.
  reap() {
    rc=0
    wait -n -p pid "${!shown[@]}" || rc=$?
    finish "$pid" "$rc"
  }
  for line in "${alone[@]}"; do
    launch "$line"
    reap
  done
  for line in "${first[@]}" "${rest[@]}"; do
    while [ "${#shown[@]}" -ge "$lanes" ]; do reap; done
    launch "$line"
  done
  while [ "${#shown[@]}" -gt 0 ]; do reap; done
  rm -rf "$logs"
  return "$failed"
}

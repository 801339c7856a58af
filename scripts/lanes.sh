# Running the integration test executables, sourced by scripts/test.sh (after scripts/timing.sh).
#
# Most of a system test's time is waiting (API servers converging, processes starting, packets
# timing out): one binary at a time left half of the 2 cores idle. So the binaries run in lanes,
# LIQO_LANES at a time (default 2; 3 saturates 2 cores and tests time out), the slowest known
# first so that the last one to end starts early. Tests inside a binary already run in parallel
# and every test works under its own prefix, so binaries never share a namespace, a cluster or
# a directory.
#
# One binary runs first, with nothing beside it: it loads the whole machine. Then the binaries
# whose tests hold time targets of earlier issues run, each with only light binaries beside it
# (little CPU, at most a cluster or two): a Kubernetes suite beside them made a target miss.
# Then the rest.

# Test target names (tests/<name>/main.rs) that run alone, and why.
LANES_ALONE=(
  gateway_load # floods at 20,000 handshakes/s and per-CPU lanes: they need the CPUs to themselves
)
# Test target names whose tests hold time targets, and which.
LANES_QUIET=(
  lab_on_k8s # whole labs holding earlier issues' time targets (first cross-cluster packet
             # <= 10 s after `liqoctl peer`, <= 5 s without traffic during a key rotation): beside
             # a Kubernetes suite, 10.3 s once; 4.3 s on a quiet machine
)
# The light binaries, which may run beside a LANES_QUIET one (each under a minute, at most a
# cluster or two; none measures). The benches' quick runs (`bench`) are not light, but they
# check their reports' shape, never figures: they run in the lanes like any other.
LANES_LIGHT=(gateway netops auth overlay proxy dataplane ipam control driver)
# Test target names in the order they start when a lane is free (seconds in a CI run of
# c995594 with two lanes: 419, 389, 233, 110, 95, 85, 57, 26, 20); the others follow in build
# order.
LANES_SLOW_FIRST=(k8s manager bench liqoctl virtual_kubelet lab gateway netops auth)

# The binaries running now: pid -> "<package>/<source> (<executable>)", their start and log.
declare -A LANES_SHOWN=() LANES_STARTED=() LANES_LOG=()

# run_binaries TSV LOGDIR: runs every executable listed in TSV (build_tests' format) in its
# package's directory, as cargo test does, its output in LOGDIR; prints each one's whole output
# when it ends (outputs never interleave) and records "test <package>/<source>" with its seconds
# and status. Every binary runs even after a failure, so one run shows every failure. Returns 1
# if any failed, if the list is empty, or if not every listed binary ran.
run_binaries() {
  local tsv=$1 logs=$2 lanes=${LIQO_LANES:-2} name failed=0 listed
  if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
    echo "error: running the test binaries side by side needs bash 5.1 or newer (wait -n -p); this is $BASH_VERSION" >&2
    return 2
  fi
  [[ "$lanes" =~ ^[1-9][0-9]*$ ]] || { echo "error: LIQO_LANES=$lanes is not a positive number" >&2; return 2; }
  listed=$(grep -c . "$tsv" || true) # grep -c exits 1 when it counts 0: the check below says so.
  [ "$listed" -gt 0 ] || { echo "error: no integration test executables listed in $tsv" >&2; return 1; }
  local -a alone=() quiet=() first=() rest=()
  for name in "${LANES_ALONE[@]}"; do
    mapfile -t -O "${#alone[@]}" alone < <(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
  done
  for name in "${LANES_QUIET[@]}"; do
    mapfile -t -O "${#quiet[@]}" quiet < <(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
  done
  for name in "${LANES_SLOW_FIRST[@]}"; do
    mapfile -t -O "${#first[@]}" first < <(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
  done
  local line
  while IFS= read -r line; do
    name=$(cut -f4 <<<"$line")
    [[ " ${LANES_ALONE[*]} ${LANES_QUIET[*]} ${LANES_SLOW_FIRST[*]} " == *" $name "* ]] || rest+=("$line")
  done <"$tsv"
  # Every binary left, in the order it starts; `started` marks those that ran beside a quiet one.
  local -a pending=("${first[@]}" "${rest[@]}")
  local -A started=()

  local pid rc exe pkg dir tname src n=0
  # launch LINE: starts it in the background and records it under its pid.
  launch() {
    IFS=$'\t' read -r exe pkg dir tname src <<<"$1"
    n=$((n + 1))
    local t0=$EPOCHREALTIME
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" CARGO_PKG_NAME="$pkg" exec "$exe") \
      </dev/null >"$logs/$n.log" 2>&1 &
    pid=$!
    LANES_STARTED[$pid]=$t0
    LANES_SHOWN[$pid]="$pkg/$src (${exe##*/})"
    LANES_LOG[$pid]="$logs/$n.log"
    echo "     started ${LANES_SHOWN[$pid]}"
  }
  # finish PID STATUS: prints its whole output and records its seconds and status.
  finish() {
    echo "     Running ${LANES_SHOWN[$1]}"
    cat "${LANES_LOG[$1]}"
    [ "$2" -eq 0 ] || echo "     ${LANES_SHOWN[$1]% (*} exited with status $2"
    record_phase "test ${LANES_SHOWN[$1]% (*}" "${LANES_STARTED[$1]}" "$2"
    [ "$2" -eq 0 ] || failed=1
    unset "LANES_STARTED[$1]" "LANES_SHOWN[$1]" "LANES_LOG[$1]"
  }
  # reap: waits for any running binary to end and finishes it. `wait -p` unsets `pid` and sets
  # it only for a binary it reaped. Bash before 5.3 may have dropped from its job table a binary
  # it reported killed by a signal (after another command), where `wait -n` no longer sees it:
  # when `wait -n` names none of them, a plain `wait PID` of each one gets its status (it blocks
  # for one still running; a pid that is not our child returns 127 at once: never a loop).
  reap() {
    local p pid=
    rc=0
    wait -n -p pid "${!LANES_SHOWN[@]}" || rc=$?
    if [ -n "${pid:-}" ] && [ -n "${LANES_SHOWN[$pid]+x}" ]; then
      finish "$pid" "$rc"
      return
    fi
    for p in "${!LANES_SHOWN[@]}"; do
      rc=0
      wait "$p" || rc=$?
      finish "$p" "$rc"
    done
  }
  for line in "${alone[@]}"; do
    launch "$line"
    while [ "${#LANES_SHOWN[@]}" -gt 0 ]; do reap; done
  done
  # light LINE: whether its binary is one of LANES_LIGHT.
  light() { [[ " ${LANES_LIGHT[*]} " == *" $(cut -f4 <<<"$1") "* ]]; }
  local quiet_pid i
  for line in "${quiet[@]}"; do
    launch "$line"
    quiet_pid=$pid
    while [ -n "${LANES_SHOWN[$quiet_pid]+x}" ]; do
      if [ "${#LANES_SHOWN[@]}" -lt "$lanes" ]; then
        for i in "${!pending[@]}"; do
          if [ -z "${started[$i]+x}" ] && light "${pending[$i]}"; then
            started[$i]=1
            launch "${pending[$i]}"
            continue 2
          fi
        done
      fi
      reap
    done
  done
  for i in "${!pending[@]}"; do
    [ -z "${started[$i]+x}" ] || continue
    while [ "${#LANES_SHOWN[@]}" -ge "$lanes" ]; do reap; done
    launch "${pending[$i]}"
  done
  while [ "${#LANES_SHOWN[@]}" -gt 0 ]; do reap; done
  if [ "$n" -ne "$listed" ]; then
    echo "error: $listed integration test executables listed, $n ran" >&2
    return 1
  fi
  return "$failed"
}

# lanes_stop: for a run that ends while binaries still run (interrupted, or the script's own
# error): names each one with the end of its output, then stops it.
lanes_stop() {
  local pid
  for pid in "${!LANES_SHOWN[@]}"; do
    echo "     still running when the run ended: ${LANES_SHOWN[$pid]}; the end of its output:"
    tail -n 60 "${LANES_LOG[$pid]}" 2>/dev/null || echo "     (no output)"
    # It may end between the listing and the signal: nothing left to stop is not an error.
    kill "$pid" 2>/dev/null || true
  done
}

# Running the integration test executables, sourced by scripts/test.sh (after scripts/timing.sh).
#
# Most of a system test's time is waiting (API servers converging, processes starting, packets
# timing out): one binary at a time left half of the 2 cores idle. So the binaries run in lanes,
# LIQO_LANES at a time (default 2; 3 saturates 2 cores and tests time out), the slowest known
# first so that the last one to end starts early. Tests inside a binary already run in parallel
# and every test works under its own prefix, so binaries never share a namespace, a cluster or
# a directory.
#
# One binary runs first, with nothing beside it: it loads the whole machine. Then the tests that
# hold time targets of earlier issues run, each binary's with only light binaries beside them
# (a Kubernetes suite beside them made a target miss); that binary's other tests run later in
# the lanes like any binary. Then the rest.

# Test target names (tests/<name>/main.rs) that run alone, and why.
LANES_ALONE=(
  gateway_load # floods at 20,000 handshakes/s and per-CPU lanes: they need the CPUs to themselves
)
# The tests that hold time targets: "<test target> <test name>..." (libtest's full names, run
# with --exact; the binary's other tests run in the lanes with --skip). A target name alone
# would run its whole binary in the quiet.
LANES_QUIET=(
  # Whole labs: the first cross-cluster packet <= 10 s after `liqoctl peer` (both), traffic
  # back <= 5 s after a key rotation (the mesh). Beside a Kubernetes suite: 10.3 s once; 4.3 s
  # on a quiet machine.
  "lab_on_k8s
   lab_k8s_root::two_clusters_peered_by_liqoctl_reach_every_pod_and_unpeer_leaves_nothing
   lab_k8s_root::three_clusters_in_a_full_mesh_reach_every_pod_and_unpeer_leaves_nothing"
)
# The light binaries, which may run beside a LANES_QUIET one (each under a minute, at most a
# cluster or two; none measures). The benches' quick runs (`bench`) are not light, but they
# check their reports' shape, never figures: they run in the lanes like any other.
LANES_LIGHT=(gateway netops auth overlay proxy dataplane ipam control driver)
# Test target names in the order they start when a lane is free (seconds in a CI run of
# 2bd0a14 with two lanes: k8s 457, manager 321, bench 224, liqoctl 104, virtual_kubelet 92,
# lab 76, gateway 58, auth 48, netops 34; lab_on_k8s's tests other than the quiet ones about
# 190 alone); the others follow in build order.
LANES_SLOW_FIRST=(k8s manager lab_on_k8s bench liqoctl virtual_kubelet lab gateway netops auth)

# How long one binary may run (seconds, LIQO_BINARY_LIMIT): past it, timeout(1) stops it
# (SIGTERM to its process group, SIGKILL to the binary 30 s later), what is left of the group
# is killed, and it is recorded as failed, naming the tests still running (those libtest said
# ran over 60 s, which it says only when tests run on more than one thread). A hung test then
# costs one binary, not the whole CI run: the slowest binary takes about 520 s of a warm run of
# about 1,300 s; a hung one once ran until CI's 90 minutes stopped everything, naming nothing.
LANES_LIMIT_DEFAULT=1200

# The binaries running now: pid -> "<package>/<source> (<executable>)", their start and log.
declare -A LANES_SHOWN=() LANES_STARTED=() LANES_LOG=()

# run_binaries TSV LOGDIR: runs every executable listed in TSV (build_tests' format) in its
# package's directory, as cargo test does, its output in LOGDIR; prints each one's whole output
# when it ends (outputs never interleave) and records "test <package>/<source>" with its seconds
# and status (a binary split by LANES_QUIET runs twice, each part with its label). Every binary
# runs even after a failure, so one run shows every failure. Returns 1 if any failed, if the list
# is empty, if not every listed binary ran, or (before any runs) if a quiet test is not in its
# binary; 2 for a bad LIQO_LANES or lane list.
run_binaries() {
  local tsv=$1 logs=$2 lanes=${LIQO_LANES:-2} limit=${LIQO_BINARY_LIMIT:-$LANES_LIMIT_DEFAULT} name failed=0 listed
  if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
    echo "error: running the test binaries side by side needs bash 5.1 or newer (wait -n -p); this is $BASH_VERSION" >&2
    return 2
  fi
  [[ "$lanes" =~ ^[1-9][0-9]*$ ]] || { echo "error: LIQO_LANES=$lanes is not a positive number" >&2; return 2; }
  [[ "$limit" =~ ^[1-9][0-9]*$ ]] || { echo "error: LIQO_BINARY_LIMIT=$limit is not a positive number of seconds" >&2; return 2; }
  listed=$(grep -c . "$tsv" || true) # grep -c exits 1 when it counts 0: the check below says so.
  [ "$listed" -gt 0 ] || { echo "error: no integration test executables listed in $tsv" >&2; return 1; }
  # Each entry: a line of the list, then a tab, the arguments and a tab, the label of a part.
  local -a alone=() quiet=() first=() rest=() words
  local -A quiet_tests=() # test target name -> the --exact names of its quiet tests
  local entry arg exe pkg dir tname src args label out
  for name in "${LANES_ALONE[@]}"; do
    mapfile -t -O "${#alone[@]}" alone < <(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
  done
  for entry in "${LANES_QUIET[@]}"; do
    read -ra words <<<"${entry//$'\n'/ }"
    name=${words[0]}
    # Its two parts must never run at once, and one entry says which tests are quiet.
    if [ -n "${quiet_tests[$name]+x}" ] || [[ " ${LANES_LIGHT[*]} ${LANES_ALONE[*]} " == *" $name "* ]]; then
      echo "error: $name is in LANES_QUIET twice, or also in LANES_LIGHT or LANES_ALONE" >&2
      return 2
    fi
    quiet_tests[$name]="${words[*]:1}"
    if [ "${#words[@]}" -eq 1 ]; then
      mapfile -t -O "${#quiet[@]}" quiet < <(awk -F'\t' -v n="$name" '$4 == n' "$tsv")
    else
      mapfile -t -O "${#quiet[@]}" quiet < <(awk -F'\t' -v n="$name" -v a="--exact ${words[*]:1}" \
        '$4 == n { print $0 "\t" a "\tquiet tests" }' "$tsv")
    fi
  done
  # A quiet test that its binary no longer has (renamed) would leave its target unchecked.
  local want have
  for entry in "${quiet[@]}"; do
    IFS=$'\t' read -r exe _ _ tname _ args _ <<<"$entry"
    [ -n "${args:-}" ] || continue
    read -ra words <<<"$args"
    want=$((${#words[@]} - 1))
    out=$("$exe" --list "${words[@]}" 2>&1) || {
      echo "error: listing the tests of $tname failed ($exe --list): $out" >&2
      return 1
    }
    have=$(grep -c ': test$' <<<"$out" || true)
    if [ "$have" -ne "$want" ]; then
      echo "error: LANES_QUIET names $want tests of $tname, which has $have of them: ${words[*]:1}" >&2
      return 1
    fi
  done
  # rest_of NAME: the list's lines of NAME, for the lanes: whole, or without its quiet tests.
  rest_of() {
    local skip=
    if [ -n "${quiet_tests[$1]+x}" ]; then
      [ -n "${quiet_tests[$1]}" ] || return 0 # its whole binary runs in the quiet
      for arg in ${quiet_tests[$1]}; do skip+=" --skip $arg"; done
      awk -F'\t' -v n="$1" -v a="--exact$skip" '$4 == n { print $0 "\t" a "\tother tests" }' "$tsv"
    else
      awk -F'\t' -v n="$1" '$4 == n' "$tsv"
    fi
  }
  for name in "${LANES_SLOW_FIRST[@]}"; do
    mapfile -t -O "${#first[@]}" first < <(rest_of "$name")
  done
  local line
  local -A handled=()
  while IFS= read -r line; do
    name=$(cut -f4 <<<"$line")
    [[ " ${LANES_ALONE[*]} ${LANES_SLOW_FIRST[*]} " == *" $name "* ]] && continue
    [ -z "${handled[$name]+x}" ] || continue # rest_of gave every line of that name
    handled[$name]=1
    mapfile -t -O "${#rest[@]}" rest < <(rest_of "$name")
  done <"$tsv"
  # A binary split in two parts runs twice.
  for name in "${!quiet_tests[@]}"; do
    [ -z "${quiet_tests[$name]}" ] || listed=$((listed + $(awk -F'\t' -v n="$name" '$4 == n' "$tsv" | grep -c . || true)))
  done
  # Every binary left, in the order it starts; `started` marks those that ran beside a quiet one.
  local -a pending=("${first[@]}" "${rest[@]}")
  local -A started=()

  local pid rc exe pkg dir tname src args label n=0
  # launch ENTRY: starts it in the background (with its arguments) and records it under its pid.
  launch() {
    IFS=$'\t' read -r exe pkg dir tname src args label <<<"$1"
    read -ra words <<<"$args"
    n=$((n + 1))
    local t0=$EPOCHREALTIME
    # timeout(1) runs it in a process group of its own and signals the whole group.
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" CARGO_PKG_NAME="$pkg" \
      exec timeout --kill-after=30 "$limit" "$exe" "${words[@]}") \
      </dev/null >"$logs/$n.log" 2>&1 &
    pid=$!
    LANES_STARTED[$pid]=$t0
    LANES_SHOWN[$pid]="$pkg/$src${label:+ [$label]} (${exe##*/})"
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
    if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
      # timeout(1) leads the group (the subshell exec'd it): what its binary started and
      # that outlived SIGTERM goes too.
      kill -KILL -- "-$1" 2>/dev/null || true
      # 124: timeout(1) stopped it at its limit; 137: SIGKILL (the limit's, 30 s on, or the
      # kernel's out of memory killer).
      # Tests that failed before it was stopped keep their panics.
      ! grep -q "panicked at " "${LANES_LOG[$1]}" ||
        record_failure "${LANES_SHOWN[$1]% (*}" "$2" "${LANES_LOG[$1]}"
      record_stopped "${LANES_SHOWN[$1]% (*}" "${LANES_LOG[$1]}" \
        "$([ "$2" -eq 124 ] && echo "stopped at its time limit of $limit s (LIQO_BINARY_LIMIT)" ||
          echo "killed (SIGKILL: 30 s after its time limit of $limit s, or out of memory)")"
    elif [ "$2" -ne 0 ]; then
      record_failure "${LANES_SHOWN[$1]% (*}" "$2" "${LANES_LOG[$1]}"
    fi
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
  # The build's writes still being flushed (gigabytes of executables and debug info) take CPU
  # from a binary that needs the CPUs to itself: flushed first.
  [ "${#alone[@]}" -eq 0 ] || sync
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
    # Also among the run's last lines (a CI log shows its end).
    record_stopped "${LANES_SHOWN[$pid]% (*}" "${LANES_LOG[$pid]}" "still running when the run ended"
    # Its process group (timeout(1) leads it). It may end between the listing and the signal:
    # nothing left to stop is not an error.
    kill -- "-$pid" 2>/dev/null || true
  done
}

# Timing of the CI's phases, sourced by scripts/test.sh and .ci/run. Each phase appends one line
# to $LIQO_TIMINGS: name, seconds, status (tab-separated; a fourth field "beside" for a command
# that ran beside the others); print_timings shows them as a table with their total.

# phase NAME CMD...: runs CMD under the header "== NAME" and records its seconds and status.
phase() {
  echo "== $1"
  phase_quiet "$@"
}

# phase_quiet NAME CMD...: the same without the header (for a phase whose output is captured).
phase_quiet() {
  local name=$1 t0=$EPOCHREALTIME rc=0
  shift
  "$@" || rc=$?
  record_phase "$name" "$t0" "$rc"
  return "$rc"
}

# record_phase NAME START_EPOCHREALTIME STATUS
record_phase() {
  awk -v n="$1" -v t0="$2" -v t1="$EPOCHREALTIME" -v rc="$3" \
    'BEGIN { printf "%s\t%.1f\t%s\n", n, t1 - t0, (rc == 0 ? "ok" : "FAILED (exit " rc ")") }' \
    >>"$LIQO_TIMINGS"
}

# beside_start NAME LOG CMD...: starts CMD in the background at idle CPU priority (SCHED_IDLE:
# it runs only on CPU time nothing else wants), its output in LOG; beside_wait collects it. For
# a check nothing else waits on (clippy): a system test mostly waits, so its idle CPU does the
# check instead of the check delaying the tests. Sets BESIDE_PID, BESIDE_NAME, BESIDE_LOG and
# BESIDE_STARTED.
beside_start() {
  BESIDE_NAME=$1 BESIDE_LOG=$2 BESIDE_STARTED=$EPOCHREALTIME
  shift 2
  echo "== $BESIDE_NAME: started beside the other phases at idle CPU priority; its output when it ends"
  # Its own process group (setsid), so that beside_pause stops it with every compiler it runs.
  setsid chrt --idle 0 "$@" </dev/null >"$BESIDE_LOG" 2>&1 &
  BESIDE_PID=$!
}

# beside_pause / beside_resume: stop the command beside_start started (SIGSTOP to its process
# group) and let it go on, around what must have the machine to itself: a test that measures the
# CPUs sees even an idle-class compiler (the gateway runs its own threads in the idle class).
beside_pause() {
  [ -n "${BESIDE_PID:-}" ] || return 0
  # It may have ended already: nothing to stop is not an error.
  kill -STOP -- "-$BESIDE_PID" 2>/dev/null || true
}
beside_resume() {
  [ -n "${BESIDE_PID:-}" ] || return 0
  kill -CONT -- "-$BESIDE_PID" 2>/dev/null || true
}

# beside_wait: waits for the command beside_start started, prints its output and records its
# seconds (marked "beside": not added to the total, it ran during the other phases). Returns its
# status.
beside_wait() {
  [ -n "${BESIDE_PID:-}" ] || return 0
  local rc=0 t0=$EPOCHREALTIME
  wait "$BESIDE_PID" || rc=$?
  echo "== $BESIDE_NAME (ran beside the other phases)"
  cat "$BESIDE_LOG"
  [ "$rc" -eq 0 ] || echo "== $BESIDE_NAME FAILED (exit $rc)"
  record_phase "$BESIDE_NAME (beside; waited for it at the end)" "$t0" "$rc"
  awk -v n="$BESIDE_NAME" -v t0="$BESIDE_STARTED" -v t1="$EPOCHREALTIME" -v rc="$rc" \
    'BEGIN { printf "%s\t%.1f\t%s\tbeside\n", n " (beside, idle CPU)", t1 - t0, (rc == 0 ? "ok" : "FAILED (exit " rc ")") }' \
    >>"$LIQO_TIMINGS"
  BESIDE_PID=
  return "$rc"
}

# beside_stop: stops the command beside_start started, if it still runs (the run ended early).
beside_stop() {
  [ -n "${BESIDE_PID:-}" ] || return 0
  echo "     still running when the run ended: $BESIDE_NAME; the end of its output:"
  tail -n 30 "$BESIDE_LOG" 2>/dev/null || echo "     (no output)"
  # It may end between the check and the signal: nothing left to stop is not an error. A
  # paused one is let go on first, or it would never see the TERM.
  kill -TERM -- "-$BESIDE_PID" 2>/dev/null || true
  kill -CONT -- "-$BESIDE_PID" 2>/dev/null || true
}

# build_tests TSV CARGO_ARGS...: builds the test targets (cargo test --no-run) and writes one
# line per integration test executable (target kind "test") to TSV:
# "<executable><TAB><package><TAB><package directory><TAB><test name><TAB><source, relative>".
build_tests() {
  local out=$1
  shift
  cargo test "$@" --no-run --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    exe = m.get("executable")
    if m.get("reason") != "compiler-artifact" or not exe:
        continue
    target = m["target"]
    if "test" not in target["kind"]:
        continue
    pid = m["package_id"]
    frag = pid.rsplit("#", 1)[-1]
    name = frag.split("@")[0] if "@" in frag else pid.split("#")[0].rstrip("/").rsplit("/", 1)[-1]
    pkg_dir = m["manifest_path"].rsplit("/", 1)[0]
    src = target["src_path"]
    rel = src[len(pkg_dir) + 1:] if src.startswith(pkg_dir + "/") else src
    print("\t".join([exe, name, pkg_dir, target["name"], rel]))
' >"$out"
}

# The recorded phases as a table and their total (the integration tests count once, as the
# phase's wall time: their binaries run side by side), then each test binary, slowest first.
print_timings() {
  echo
  echo "== timings (seconds)"
  awk -F'\t' '
    $1 ~ /^test / { n++; next }
    $4 == "beside" { beside[++b] = sprintf("  %-58s %8.1f  %s", $1, $2, $3); next }
    { printf "  %-58s %8.1f  %s\n", $1, $2, $3; total += $2 }
    END {
      printf "  %-58s %8.1f  (%d test binaries)\n", "total", total, n
      for (i = 1; i <= b; i++) print beside[i]
    }' "$LIQO_TIMINGS"
  if grep -q $'^test ' "$LIQO_TIMINGS"; then
    echo "== integration test binaries (seconds each ran, slowest first; up to ${LIQO_LANES:-2} at a time)"
    grep $'^test ' "$LIQO_TIMINGS" | sort -t$'\t' -k2,2 -rn |
      awk -F'\t' '{ printf "  %-58s %8.1f  %s\n", substr($1, 6), $2, $3 }'
  fi
}

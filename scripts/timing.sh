# Timing of the CI's phases, sourced by scripts/test.sh and .ci/run. Each phase appends one line
# to $LIQO_TIMINGS: name, seconds, status (tab-separated); print_timings shows them as a table
# with their total.

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

# record_failure LABEL STATUS LOG: keeps, for the run's last lines, why a test binary failed:
# the panics in its output (each from its "panicked at" line, at most 30 lines without its
# backtrace's, long lines cut at 500 characters; at most 8 panics), or its output's last 10
# lines when it has none (killed, a harness error). A CI log shows its beginning and its end:
# a binary's own output puts the panics in the middle, after every command the failing test
# printed.
record_failure() {
  {
    echo "  $1 (exit $2):"
    awk '
      /panicked at / { n++; if (n > 8) exit; left = 30; skip = 0 }
      left > 0 {
        # The backtrace skipped (its frames, its closing note), not what follows it (what the
        # test printed while unwinding: a lab diagnosis).
        if (/^stack backtrace:/) { skip = 1; next }
        if (skip) {
          if (/^ +[0-9]+: / || /^ +at /) next
          skip = 0
          if (/^note: Some details are omitted/) next
        }
        if (/^note: run with `RUST_BACKTRACE/) next
        print "    " (length($0) > 500 ? substr($0, 1, 500) " [...]" : $0)
        left--
      }
      END { if (n == 0) exit 1 }' "$3" || {
      echo "    no panic in its output; its last lines:"
      tail -n 10 "$3" | cut -c1-500 | sed 's/^/    /'
    }
  } >>"$LIQO_TIMINGS.failures"
  # A line per panic (its test, where, the message's first line), printed last of all: a
  # lab's diagnosis after a panic fills the lines above and the log's end still says why.
  awk -v bin="$1" '
    function say() { print "  " bin ": " t " at " at ": " (length(m) > 300 ? substr(m, 1, 300) " [...]" : m); want = 0 }
    /panicked at / {
      if (want) say()
      n++; if (n > 8) next
      t = $0; sub(/^thread .?/, "", t); sub(/.? \([0-9]+\) panicked at .*/, "", t); sub(/.? panicked at .*/, "", t)
      at = $0; sub(/.*panicked at /, "", at); sub(/:$/, "", at)
      m = "(no message)"; want = 1; next
    }
    n > 8 { next }
    # The first line of assert_eq! says nothing: its left and right lines join it.
    want == 1 { m = $0; if (m ~ /^assertion `left/) { want = 3; next } }
    want > 1 { m = m " " $0; if (--want > 1) next }
    want { say() }
    END {
      if (want) say()
      if (n > 8) print "  " bin ": and " n - 8 " more panics (in its whole output)"
      if (n == 0) exit 1
    }' "$3" >>"$LIQO_TIMINGS.failures.short" ||
    echo "  $1: exit $2 without a panic (its last lines are above)" >>"$LIQO_TIMINGS.failures.short"
}

# record_stopped LABEL LOG WHY: keeps, for the run's last lines, a test binary stopped from
# outside (its time limit, the run's end): WHY, the tests still running then (libtest names a
# test running over 60 s and later its result; those without a result), and its output's last
# 10 lines.
record_stopped() {
  local running
  running=$(awk '
    / has been running for over 60 seconds$/ {
      t = $0; sub(/^test /, "", t); sub(/ has been running for over 60 seconds$/, "", t); slow[t] = 1; next
    }
    /^test .* \.\.\. / { t = $0; sub(/^test /, "", t); sub(/ \.\.\. .*/, "", t); delete slow[t] }
    END { for (t in slow) printf "%s%s", (n++ ? ", " : ""), t }' "$2" 2>/dev/null) || running=
  # (Under test.sh's `set -e`, a log that cannot be read must not end the run here.)
  running=${running:-none over 60 s}
  {
    echo "  $1: $3; tests still running: $running; its last lines:"
    tail -n 10 "$2" 2>/dev/null | cut -c1-500 | sed 's/^/    /' || echo "    (its output could not be read)"
  } >>"$LIQO_TIMINGS.failures"
  echo "  $1: $3; tests still running: $running" >>"$LIQO_TIMINGS.failures.short"
}

# print_failures: what record_failure kept, if anything failed.
print_failures() {
  [ -s "$LIQO_TIMINGS.failures" ] || return 0
  echo "== why the failed test binaries failed (their panics, or why they were stopped; the whole output is above)"
  cat "$LIQO_TIMINGS.failures"
  if [ -s "$LIQO_TIMINGS.failures.short" ]; then
    echo "== the panics and the stopped binaries, a line each"
    cat "$LIQO_TIMINGS.failures.short"
  fi
}

# print_phases_line WALL: the phases (not each test binary) and WALL seconds on two lines, the
# run's very last: a CI log cut in the middle still says where the time went (a run stopped by
# CI's limit showed only its fastest binaries).
print_phases_line() {
  echo "== the phases (seconds)"
  awk -F'\t' -v wall="$1" '
    $1 ~ /^test / { next }
    { printf "%s%s %.0f%s", (n++ ? ", " : "  "), $1, $2, ($3 == "ok" ? "" : " " $3); sum += $2 }
    END {
      # A phase cut short (the run stopped in it) recorded nothing: its time is what is left.
      if (wall - sum >= 10) printf "%sin no finished phase %.0f", (n ? ", " : "  "), wall - sum
      printf "%swall %.0f\n", (n || wall - sum >= 10 ? "; " : "  "), wall
    }' "$LIQO_TIMINGS"
}

# The recorded phases as a table and their total (the integration tests count once, as the
# phase's wall time: their binaries run side by side), then each test binary, slowest first.
print_timings() {
  echo
  echo "== timings (seconds)"
  awk -F'\t' '
    $1 ~ /^test / { n++; next }
    { printf "  %-58s %8.1f  %s\n", $1, $2, $3; total += $2 }
    END { printf "  %-58s %8.1f  (%d test binaries)\n", "total", total, n }' "$LIQO_TIMINGS"
  if grep -q $'^test ' "$LIQO_TIMINGS"; then
    echo "== integration test binaries (seconds each ran, slowest first; up to ${LIQO_LANES:-2} at a time)"
    grep $'^test ' "$LIQO_TIMINGS" | sort -t$'\t' -k2,2 -rn |
      awk -F'\t' '{ printf "  %-58s %8.1f  %s\n", substr($1, 6), $2, $3 }'
  fi
}

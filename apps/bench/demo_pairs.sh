#!/bin/bash
# The one-way demo (scripts/demo: tickrail-replay's synthetic feed at 1 M ticks/s to
# tickrail-jitter over shared memory) for two builds, a change's before and after, in
# interleaved pairs, alternating which goes first (ABBA). Prints one line per run: one-way
# p50, p99, p99.9 and max, and the run's JSON goes to $OUT/pairN-WHICH.json.
#   apps/bench/demo_pairs.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR
# Environment: PAIRS (6), SECONDS_PER_RUN (3), OUT (demo-pairs), JITTER_CPU (1), REPLAY_CPU (0),
# BEFORE_ARGS and AFTER_ARGS: extra tickrail-replay arguments for each build (e.g.
# AFTER_ARGS="--housekeeping-cpus 0", which the before build may not know).
set -u
case "${1:-}" in
  -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac
[ $# -eq 2 ] || { echo "demo_pairs.sh: BEFORE_BUILD_DIR AFTER_BUILD_DIR (see --help)" >&2; exit 2; }
for d in "$1" "$2"; do
  for p in apps/replay/tickrail-replay apps/jitter/tickrail-jitter; do
    [ -x "$d/$p" ] || { echo "demo_pairs.sh: not an executable: $d/$p" >&2; exit 2; }
  done
done
OUT=${OUT:-demo-pairs} PAIRS=${PAIRS:-6} S=${SECONDS_PER_RUN:-3}
JC=${JITTER_CPU:-1} RC=${REPLAY_CPU:-0}
mkdir -p "$OUT"
run() {  # $1: build dir, $2: label, $3: pair, $4: extra replay arguments
  local j=$OUT/pair$3-$2.json ch=demo-pairs-$$-$3-$2
  rm -f "$j"
  "$1/apps/jitter/tickrail-jitter" --channel "$ch" --cpu "$JC" --quiet --json "$j" >/dev/null 2>&1 &
  local jp=$!
  # shellcheck disable=SC2086
  "$1/apps/replay/tickrail-replay" --channel "$ch" --cpu "$RC" $4 --count $((S * 1000000)) \
    --wait-subscribers 1 --quiet >/dev/null 2>"$OUT/replay.log" || { cat "$OUT/replay.log"; }
  wait "$jp"
  [ -f "$j" ] || { echo "pair $3 $2: no report"; return; }
  python3 -c "
import json; j=json.load(open('$j'))
print('pair $3 %-6s one-way: received %d p50 %d ns p99 %d ns p99.9 %d ns max %.1f us' % ('$2', j['received'], j['p50_ns'], j['p99_ns'], j['p999_ns'], j['max_ns']/1e3))"
}
echo "# $(date -u '+%F %T') UTC, $(uptime | sed 's/.*load/load/'); replay cpu $RC, jitter cpu $JC"
for i in $(seq 1 "$PAIRS"); do
  if [ $((i % 2)) -eq 1 ]; then
    run "$1" before "$i" "${BEFORE_ARGS:-}"; run "$2" after "$i" "${AFTER_ARGS:-}"
  else
    run "$2" after "$i" "${AFTER_ARGS:-}"; run "$1" before "$i" "${BEFORE_ARGS:-}"
  fi
done

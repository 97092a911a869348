#!/bin/bash
# RC ping-pong RTT/2 of two tickrail-jitter builds (a change's before and after) in one guest
# boot: each round runs ib_write_lat for reference, then, for CQ and memory polling (split
# commit), both binaries, alternating from round to round which goes first (ABBA). Each
# ping-pong: 5,000 pings after 500 of warm-up; each run's JSON goes to $OUT/rROUND-MODE-WHICH.json.
# The guest sees the source tree and the build dir only, so copy the base binary into the
# build dir first (tickrail's programs link the library statically). From the source tree:
#   mkdir -p build/base && cp ../base-build/apps/jitter/tickrail-jitter build/base/
#   cp apps/bench-rc/pingpong_pairs.sh build/
#   scripts/rig --no-build --command 'ROUNDS=8 bash pingpong_pairs.sh'
# Environment: BEFORE (default base/tickrail-jitter), AFTER (apps/jitter/tickrail-jitter),
# ROUNDS (8), OUT (pingpong-pairs); TICKRAIL_RDMA_ADDR and TICKRAIL_RDMA_DEV as the rig sets them.
set -u
case "${1:-}" in
  -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  "") ;;
  *) echo "pingpong_pairs.sh: no arguments (see --help); settings come from the environment" >&2; exit 2 ;;
esac
A=$TICKRAIL_RDMA_ADDR D=$TICKRAIL_RDMA_DEV
BEFORE=${BEFORE:-./base/tickrail-jitter} AFTER=${AFTER:-./apps/jitter/tickrail-jitter}
OUT=${OUT:-pingpong-pairs}
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "pingpong_pairs.sh: not an executable: $b" >&2; exit 2; }
done
# Both sides read RDTSC, as perftest does (see pingpong_vs_perftest.sh).
export TICKRAIL_CLOCK=${TICKRAIL_CLOCK:-tsc}
ulimit -l unlimited
mkdir -p "$OUT"
echo "guest: $(nproc) cpus, clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
n=0
for r in $(seq 1 "${ROUNDS:-8}"); do
  ib_write_lat -d "$D" -s 64 -n 5000 -p 18515 >/tmp/srv.log 2>&1 &
  sleep 1
  echo "round $r: ib_write_lat: $(ib_write_lat -d "$D" -s 64 -n 5000 -p 18515 "$A" 2>&1 | awk '/^ *64 /{print "t_min " $3 " t_typical " $5 " t_99 " $8}')"
  wait
  if [ $((r % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
  for mode in cq memory; do
    for which in $order; do
      n=$((n + 1))
      [ "$which" = before ] && bin=$BEFORE || bin=$AFTER
      cat >/tmp/pp.toml <<T
transport = "rc"
channel = "pp$n"
[rdma]
address = "$A"
device = "$D"
port = $((7600 + n * 2))
polling = "$mode"
split_commit = true
T
      j=$OUT/r$r-$mode-$which.json
      rm -f "$j"
      "$bin" -c /tmp/pp.toml --mode pingpong --count 5000 --warmup 500 \
        --quiet --json "$j" >/tmp/ping.log 2>&1 &
      sleep 1
      "$bin" -c /tmp/pp.toml --mode echo >/tmp/echo.log 2>&1 &
      wait
      [ -f "$j" ] || { echo "round $r: $mode $which failed:"; tail -3 /tmp/ping.log /tmp/echo.log; continue; }
      python3 -c "
import json; j=json.load(open('$j'))
print('round $r: %-6s %-6s RTT/2: count %d timeouts %d min %.2f us p50 %.2f us p99 %.2f us max %.1f us' % ('$mode', '$which', j['count'], j['timeouts'], j['min_ns']/1e3, j['p50_ns']/1e3, j['p99_ns']/1e3, j['max_ns']/1e3))"
    done
  done
done

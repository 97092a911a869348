#!/bin/bash
# RTT/2 of perftest's ib_write_lat next to tickrail-jitter's ping-pong over RC (memory polling
# with split commit, and CQ polling), alternating, 5 rounds: closed loop on both sides, so the
# figures compare like with like. Run from the build dir where TICKRAIL_RDMA_ADDR and
# TICKRAIL_RDMA_DEV are set, e.g. in the rig:
#   cp ../apps/bench-rc/pingpong_vs_perftest.sh . && scripts/rig --command 'bash pingpong_vs_perftest.sh'
set -u
A=$TICKRAIL_RDMA_ADDR D=$TICKRAIL_RDMA_DEV
# perftest times with RDTSC whatever the CPU says; a TCG guest hides the invariant-TSC bit, so
# tickrail would fall back to clock_gettime (a system call on hpet, ~1 us in the vDSO under TCG)
# in every spin. TICKRAIL_CLOCK=tsc makes both sides read the same counter the same way.
export TICKRAIL_CLOCK=${TICKRAIL_CLOCK:-tsc}
ulimit -l unlimited
for r in $(seq 1 "${ROUNDS:-5}"); do
  ib_write_lat -d "$D" -s 64 -n 5000 -p 18515 >/tmp/srv.log 2>&1 &
  sleep 1
  echo "round $r: ib_write_lat: $(ib_write_lat -d "$D" -s 64 -n 5000 -p 18515 "$A" 2>&1 | awk '/^ *64 /{print "t_min " $3 " t_typical " $5 " t_99 " $8}')"
  wait
  for mode in memory cq; do
    [ "$mode" = memory ] && port=$((7600 + r * 10)) || port=$((7602 + r * 10))
    cat >/tmp/pp.toml <<T
transport = "rc"
channel = "pp$r$mode"
[rdma]
address = "$A"
device = "$D"
port = $port
polling = "$mode"
split_commit = true
T
    rm -f /tmp/pp.json
    ./apps/jitter/tickrail-jitter -c /tmp/pp.toml --mode pingpong --count 5000 --warmup 500 \
      --quiet --json /tmp/pp.json >/tmp/ping.log 2>&1 &
    sleep 1
    ./apps/jitter/tickrail-jitter -c /tmp/pp.toml --mode echo >/tmp/echo.log 2>&1 &
    wait
    [ -f /tmp/pp.json ] || { echo "round $r: $mode ping-pong failed:"; tail -3 /tmp/ping.log /tmp/echo.log; continue; }
    python3 -c "
import json; j=json.load(open('/tmp/pp.json'))
print('round $r: tickrail RC $mode ping-pong RTT/2: count %d timeouts %d min %.2f us p50 %.2f us p99 %.2f us max %.1f us' % (j['count'], j['timeouts'], j['min_ns']/1e3, j['p50_ns']/1e3, j['p99_ns']/1e3, j['max_ns']/1e3))"
  done
done

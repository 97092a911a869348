#!/bin/bash
# RTT/2 of perftest's ib_write_lat and ib_send_lat next to tickrail-jitter's RC ping-pong (CQ
# polling and memory polling with split commit), in interleaved rounds in one guest: 64 bytes,
# 5,000 round trips each (tickrail after 500 of warm-up). Beside them, rc-imm-lat (built beside
# this script): the same ping-pong of RDMA WRITE WITH IMMEDIATE, tickrail's CQ-polling operation,
# with no tickrail code on its path (perftest 4.5-0.17 has no such test). With PIN=1 (the default) every side
# runs on a cpu of its own: the pinging side on cpu 0 and the echoing side on cpu 1, perftest's
# client and server alike (taskset), tickrail's with --cpu, which keeps its background threads
# off that cpu as far as the process can. With TRACE=1, the kernel's scheduler and interrupt
# events (ftrace) are recorded during each round's ib_send_lat and tickrail CQ runs into
# $OUT/rROUND-NAME.trace, for apps/bench-rc/trace_gaps.py: what ran on the polling cpus, and
# for how long. Run from the build dir, where the rig sets TICKRAIL_RDMA_ADDR and
# TICKRAIL_RDMA_DEV:
#   cp apps/bench-rc/rc_tail.sh build/
#   scripts/rig --no-build --command 'ROUNDS=5 bash rc_tail.sh'
# With BASE set to another tickrail-jitter (a change's before, copied into the build dir, which
# is all the guest sees besides the source tree), each round runs both, alternating which goes
# first. MODES picks tickrail's polling modes (default "cq memory"). Environment: ROUNDS (5), PIN
# (1), TRACE (0), OUT (rc-tail), JITTER (apps/jitter/tickrail-jitter), BASE (unset), MODES,
# IMM (apps/bench-rc/rc-imm-lat), IMM_QPS ("1 2": rc-imm-lat with one connection, and one
# each way).
set -u
case "${1:-}" in
  -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  "") ;;
  *) echo "rc_tail.sh: no arguments (see --help); settings come from the environment" >&2; exit 2 ;;
esac
A=$TICKRAIL_RDMA_ADDR D=$TICKRAIL_RDMA_DEV
JITTER=${JITTER:-./apps/jitter/tickrail-jitter} OUT=${OUT:-rc-tail} PIN=${PIN:-1} TRACE=${TRACE:-0}
BASE=${BASE:-} MODES=${MODES:-cq memory} IMM=${IMM:-./apps/bench-rc/rc-imm-lat}
for b in "$JITTER" $BASE "$IMM"; do
  [ -x "$b" ] || { echo "rc_tail.sh: not an executable: $b" >&2; exit 2; }
done
# Both sides read RDTSC, as perftest does (see pingpong_vs_perftest.sh).
export TICKRAIL_CLOCK=${TICKRAIL_CLOCK:-tsc}
ulimit -l unlimited
mkdir -p "$OUT"
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
if [ "$PIN" = 1 ]; then PING="taskset -c 0" ECHO="taskset -c 1" PCPU=0 ECPU=1
else PING="" ECHO="" PCPU=-1 ECPU=-1; fi
echo "guest: $(nproc) cpus, clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), kernel $(uname -r), PIN=$PIN TRACE=$TRACE"

trace_on() {
  [ "$TRACE" = 1 ] || return 0
  echo 0 >$T/tracing_on
  echo >$T/trace
  echo 8192 >$T/buffer_size_kb
  echo mono >$T/trace_clock
  for e in sched/sched_switch sched/sched_wakeup irq/irq_handler_entry irq/irq_handler_exit \
    irq/softirq_entry irq/softirq_exit irq_vectors/local_timer_entry irq_vectors/local_timer_exit \
    irq_vectors/call_function_single_entry irq_vectors/call_function_single_exit \
    irq_vectors/reschedule_entry irq_vectors/reschedule_exit workqueue/workqueue_execute_start \
    workqueue/workqueue_execute_end; do
    [ -e $T/events/$e/enable ] && echo 1 >$T/events/$e/enable
  done
  # where a polling thread went to sleep in the kernel: a stack for each time
  echo 'stacktrace if prev_state & 3 && (prev_comm == "tickrail-jitter" || prev_comm == "ib_send_lat")' \
    >$T/events/sched/sched_switch/trigger || echo "  (no sched_switch stack trigger)"
  echo 1 >$T/tracing_on
}
trace_off() {  # $1: the file
  [ "$TRACE" = 1 ] || return 0
  echo 0 >$T/tracing_on
  echo '!stacktrace' >$T/events/sched/sched_switch/trigger 2>/dev/null
  cp $T/trace "$1"
  echo "  trace: $1: $(grep -c . "$1") lines, $(cat $T/per_cpu/cpu*/stats | awk '/^overrun/{s+=$2} END{print s+0}') overrun"
}

perftest() {  # $1: ib_write_lat or ib_send_lat, $2: round
  timeout 120 $ECHO "$1" -d "$D" -s 64 -n 5000 -p 18515 >/tmp/srv.log 2>&1 &
  sleep 1
  [ "$1" = ib_send_lat ] && trace_on
  local line
  line=$(timeout 120 $PING "$1" -d "$D" -s 64 -n 5000 -p 18515 "$A" 2>&1 | awk '/^ *64 /{print "t_min " $3 " t_typical " $5 " t_99 " $8 " t_99.9 " $9}')
  [ "$1" = ib_send_lat ] && trace_off "$OUT/r$2-ib_send_lat.trace"
  wait
  echo "round $2: $1: $line"
}

imm() {  # $1: round, then for each of IMM_QPS (1 2): one connection for both ways, or one each
  for q in ${IMM_QPS:-1 2}; do
    # bounded: an echoing side whose peer never came would wait in rdma_get_request
    timeout 120 $ECHO "$IMM" -p 18600 -n 5000 -w 500 -q "$q" >/tmp/imm-srv.log 2>&1 &
    sleep 1
    echo "round $1: rc-imm-lat -q $q: $(timeout 120 $PING "$IMM" -p 18600 -n 5000 -w 500 -q "$q" "$A" 2>&1 | tail -1)"
    wait
  done
}

n=0
tickrail() {  # $1: cq or memory, $2: round, $3: the binary, $4: its label
  n=$((n + 1))
  cat >/tmp/pp.toml <<T
transport = "rc"
channel = "tail$n"
[rdma]
address = "$A"
device = "$D"
port = $((7600 + n * 2))
polling = "$1"
split_commit = true
T
  local j=$OUT/r$2-$1$4.json
  rm -f "$j"
  [ "$1" = cq ] && trace_on
  "$3" -c /tmp/pp.toml --mode pingpong --cpu $PCPU --count 5000 --warmup 500 \
    --quiet --json "$j" >/tmp/ping.log 2>&1 &
  sleep 1
  "$3" -c /tmp/pp.toml --mode echo --cpu $ECPU >/tmp/echo.log 2>&1 &
  wait
  [ "$1" = cq ] && trace_off "$OUT/r$2-cq$4.trace"
  [ -f "$j" ] || { echo "round $2: $1 failed:"; tail -3 /tmp/ping.log /tmp/echo.log; return; }
  python3 -c "
import json; j=json.load(open('$j'))
print('round $2: tickrail$4 %-6s RTT/2: count %d timeouts %d min %.2f us p50 %.2f us p99 %.2f us p99.9 %.2f us max %.1f us' % ('$1', j['count'], j['timeouts'], j['min_ns']/1e3, j['p50_ns']/1e3, j['p99_ns']/1e3, j['p999_ns']/1e3, j['max_ns']/1e3))"
}

tickrails() {  # $1: round
  for m in $MODES; do
    if [ -z "$BASE" ]; then
      tickrail "$m" "$1" "$JITTER" ""
    elif [ $(($1 % 2)) -eq 1 ]; then
      tickrail "$m" "$1" "$BASE" -base; tickrail "$m" "$1" "$JITTER" -new
    else
      tickrail "$m" "$1" "$JITTER" -new; tickrail "$m" "$1" "$BASE" -base
    fi
  done
}

# Odd rounds run perftest first, even rounds tickrail first: a guest that drifts within a round
# favours neither.
for r in $(seq 1 "${ROUNDS:-5}"); do
  if [ $((r % 2)) -eq 1 ]; then
    perftest ib_write_lat "$r"; perftest ib_send_lat "$r"; imm "$r"; tickrails "$r"
  else
    tickrails "$r"; imm "$r"; perftest ib_send_lat "$r"; perftest ib_write_lat "$r"
  fi
done

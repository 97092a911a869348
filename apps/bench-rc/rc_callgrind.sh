#!/bin/bash
# Instructions per step of the RC ping-pong, counted inside the guest: tickrail-jitter's CQ-polling
# ping-pong (--mode pingpong against --mode echo) and rc-imm-lat -q 2 (the same WRITE WITH
# IMMEDIATE ping-pong with no tickrail code), each end under valgrind --tool=callgrind, COUNT round
# trips after 100 of warm-up. Instructions, not seconds: the counts of a step repeat from run to
# run whatever the guest's speed, so a change's cost can be compared across commits.
# apps/bench-rc/callgrind_calls.py then gives each function's instructions per call. The guest
# needs valgrind (part of the image's cache key), and tickrail-jitter built with -g for
# per-line figures (callgrind_annotate --auto=yes):
#   cp apps/bench-rc/rc_callgrind.sh build/
#   TICKRAIL_RIG_EXTRA_PACKAGES=valgrind scripts/rig --no-build --command 'bash rc_callgrind.sh'
#   apps/bench-rc/callgrind_calls.py 'RcPublisher|RcSubscriber|Publisher::|Subscriber::' \
#     build/rc-callgrind/tr-echo.out-01
# Run from the build dir, where the rig sets TICKRAIL_RDMA_ADDR and TICKRAIL_RDMA_DEV.
# Environment: COUNT (2000), OUT (rc-callgrind), JITTER (apps/jitter/tickrail-jitter), IMM
# (apps/bench-rc/rc-imm-lat).
set -u
case "${1:-}" in
  -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  "") ;;
  *) echo "rc_callgrind.sh: no arguments (see --help); settings come from the environment" >&2; exit 2 ;;
esac
A=$TICKRAIL_RDMA_ADDR D=$TICKRAIL_RDMA_DEV
COUNT=${COUNT:-2000} OUT=${OUT:-rc-callgrind}
JITTER=${JITTER:-./apps/jitter/tickrail-jitter} IMM=${IMM:-./apps/bench-rc/rc-imm-lat}
command -v valgrind >/dev/null || { echo "rc_callgrind.sh: no valgrind in the guest (TICKRAIL_RIG_EXTRA_PACKAGES=valgrind)" >&2; exit 2; }
for b in "$JITTER" "$IMM"; do
  [ -x "$b" ] || { echo "rc_callgrind.sh: not an executable: $b" >&2; exit 2; }
done
export TICKRAIL_CLOCK=tsc
ulimit -l unlimited
rm -rf "$OUT" && mkdir -p "$OUT"
# One output file per thread (-01 is the main thread: the polling and publishing one).
VG=(valgrind --tool=callgrind --separate-threads=yes --dump-instr=yes)
# Under valgrind a round trip takes milliseconds: generous timeouts.
cat >"$OUT/pp.toml" <<T
transport = "rc"
channel = "cg"
[subscriber]
attach_timeout_ms = 60000
publisher_timeout_ms = 60000
[rdma]
address = "$A"
device = "$D"
port = 7700
polling = "cq"
T
taskset -c 1 "${VG[@]}" --callgrind-out-file="$OUT/tr-echo.out" "$JITTER" -c "$OUT/pp.toml" --mode echo \
  >"$OUT/tr-echo.log" 2>&1 &
sleep 5
taskset -c 0 "${VG[@]}" --callgrind-out-file="$OUT/tr-ping.out" "$JITTER" -c "$OUT/pp.toml" --mode pingpong \
  --count "$COUNT" --warmup 100 --quiet --json "$OUT/tr.json" >"$OUT/tr-ping.log" 2>&1
wait
taskset -c 1 "${VG[@]}" --callgrind-out-file="$OUT/imm-echo.out" "$IMM" -p 18600 -n "$COUNT" -w 100 -q 2 \
  >"$OUT/imm-echo.log" 2>&1 &
sleep 5
taskset -c 0 "${VG[@]}" --callgrind-out-file="$OUT/imm-ping.out" "$IMM" -p 18600 -n "$COUNT" -w 100 -q 2 "$A" \
  >"$OUT/imm-ping.log" 2>&1
wait
ok=1
for f in tr-echo tr-ping imm-echo imm-ping; do
  if [ -s "$OUT/$f.out-01" ]; then echo "$f: $OUT/$f.out-01"; else echo "$f: no profile (log: $OUT/$f.log)"; ok=0; fi
done
[ "$ok" = 1 ]

#!/bin/bash
# Instructions per tick of the shared-memory publish-to-handler path, counted by callgrind in
# one thread (ipt_loop): exact and repeatable, so two commits compare without a quiet host.
# Prints the total per tick and the functions that cost most per tick, inclusive of what they
# call. Run from the source tree after building:
#   apps/bench/instructions.sh [BUILD_DIR] [ipt_loop options, e.g. --stamp off]
# Environment: TICKS (20000).
set -u
case "${1:-}" in
  -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
esac
build=${1:-build}
[ $# -gt 0 ] && shift
bin=$build/apps/bench/ipt_loop
[ -x "$bin" ] || { echo "instructions.sh: not built: $bin" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 2; }
ticks=${TICKS:-20000}
out=$(mktemp /tmp/tickrail-ipt.XXXXXX)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
  --toggle-collect='*ipt_measured_loop*' "$bin" --ticks "$ticks" "$@" >/dev/null 2>"$out.log" ||
  { cat "$out.log" >&2; rm -f "$out.log"; exit 1; }
rm -f "$out.log"
callgrind_annotate --inclusive=yes "$out" 2>/dev/null | python3 -c "
import re, sys
ticks = $ticks
rows = []
for line in sys.stdin:
    m = re.match(r'^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$', line)
    if m:
        rows.append((int(m.group(1).replace(',', '')), m.group(2).strip()))
total = next(ir for ir, name in rows if name.startswith('PROGRAM TOTALS')) if any(n.startswith('PROGRAM TOTALS') for _, n in rows) else rows[0][0]
print(f'instructions per tick (publish + poll + handler): {total / ticks:.1f}  ({ticks} ticks, ipt_loop $*)')
for ir, name in [r for r in rows if not r[1].startswith('PROGRAM TOTALS')][:20]:
    name = re.sub(r'^\S+:', '', name)
    print(f'  {ir / ticks:8.1f}  {name[:110]}')
"

#!/bin/bash
# Instructions per tick of the shared-memory publish-to-handler path, counted by callgrind in
# one thread (ipt_loop): exact and repeatable, so two commits compare without a quiet host.
# Prints the total per tick and the functions that cost most per tick, inclusive of what they
# call. Run from the source tree after building:
#   apps/bench/instructions.sh [BUILD_DIR] [ipt_loop options, e.g. --stamp off, --mix 1000 --state on, --lines 2]
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
# callgrind_annotate lines: "  1,234 (12.3%)  file:function [object]"
table() {  # $1: yes for inclusive counts, no for each function's own
  callgrind_annotate --inclusive="$1" "$out" 2>/dev/null | python3 -c "
import re, sys
ticks, inclusive = $ticks, '$1' == 'yes'
rows = []
for line in sys.stdin:
    m = re.match(r'^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$', line)
    if not m:
        continue
    name = re.sub(r'\s+\[[^]]*\]$', '', m.group(2).strip())
    name = re.sub(r'^(\?\?\?|[^ ]*[./][^ ]*):(?!:)', '', name)
    rows.append((int(m.group(1).replace(',', '')), name))
if not rows:
    sys.exit('instructions.sh: callgrind recorded nothing (is ipt_measured_loop there?)')
total = rows[0][0]
skip = re.compile(r'PROGRAM TOTALS|__libc_start|below main|^main$|^0x|ipt_measured_loop|loop<')
if inclusive:
    print(f'instructions per tick (publish + poll + handler): {total / ticks:.1f}  ({ticks} ticks, ipt_loop $args)')
    print('  per tick, inclusive of what each calls:')
else:
    print('  per tick, each function by itself:')
for ir, name in [r for r in rows if not (skip if inclusive else re.compile('PROGRAM TOTALS')).search(r[1])][:12]:
    if ir / ticks >= 0.5:
        print(f'  {ir / ticks:8.1f}  {name[:100]}')
"
}
args="$*"
table yes && table no

#!/usr/bin/env python3
"""Instructions per call of each function whose name matches PATTERN, from callgrind out files.

    callgrind_calls.py PATTERN FILE...

Prints, for each matching function, inclusive and self instructions (Ir), the number of calls
and the inclusive instructions per call: what a step of a loop costs, where callgrind_annotate
gives totals. Files are merged (one per thread, or several runs). Recursion is not unfolded: a
recursive function's inclusive cost counts its inner calls again.
"""
import collections
import re
import sys


def parse(path, self_ir, call_ir, calls):
    names, objects = {}, {}
    fn = cfn = None
    pending = None
    positions = 1  # columns before the cost: "line", or "instr line" with --dump-instr=yes

    def resolve(table, value):
        m = re.match(r"\((\d+)\)(?: (.*))?", value)
        if not m:
            return value
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table[m.group(1)]

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("positions:"):
                positions = len(line.split()) - 1
            elif line.startswith(("ob=", "cob=")):
                resolve(objects, line.split("=", 1)[1])
            elif line.startswith("fn="):
                fn = resolve(names, line[3:])
            elif line.startswith("cfn="):
                cfn = resolve(names, line[4:])
            elif line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) <= positions:
                    continue
                cost = int(parts[positions])
                if pending is not None:  # the cost line after calls=: inclusive cost of those calls
                    call_ir[fn] += cost
                    calls[cfn] += pending
                    pending = None
                else:
                    self_ir[fn] += cost


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip())
    try:
        pattern = re.compile(sys.argv[1])
    except re.error as e:
        sys.exit(f"callgrind_calls.py: PATTERN '{sys.argv[1]}': {e}")
    self_ir, call_ir, calls = collections.Counter(), collections.Counter(), collections.Counter()
    for path in sys.argv[2:]:
        try:
            with open(path, errors="replace") as f:
                if not f.readline().startswith("# callgrind format"):
                    sys.exit(f"callgrind_calls.py: {path}: not a callgrind out file")
            parse(path, self_ir, call_ir, calls)
        except (OSError, ValueError) as e:
            sys.exit(f"callgrind_calls.py: {path}: {e}")
    rows = sorted(((self_ir[f] + call_ir[f], f) for f in set(self_ir) | set(calls) if pattern.search(f)),
                  reverse=True)
    print(f"{'inclusive':>12} {'self':>11} {'calls':>9} {'incl/call':>9}  function")
    for incl, f in rows[:60]:
        n = calls[f]
        per = f"{incl / n:9.1f}" if n else f"{'-':>9}"
        print(f"{incl:>12,} {self_ir[f]:>11,} {n:>9,} {per}  {f[:120]}")


if __name__ == "__main__":
    main()

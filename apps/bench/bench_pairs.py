#!/usr/bin/env python3
"""Two tickrail-bench binaries (a change's before and after) in interleaved pairs on the same
cpus, one round each, alternating which goes first (ABBA), so that a host whose core-to-core
speed drifts or flips between states cannot pass for a difference between the binaries. Prints
a Markdown table of the pairs and the medians of the per-pair ratios after/before. A benchmark,
not a test: it fails only when a program fails or the command line is wrong.

  bench_pairs.py --before OLD/tickrail-bench --after NEW/tickrail-bench [--pairs 12]
                 [--cpus 0,1] [--max-load 1.5] [--load-wait 300] [--out DIR] [-- BENCH_ARGS...]

BENCH_ARGS default to --samples 200000 --throughput-ticks 20000000 --stats on. Before each
pair it waits (at most --load-wait seconds) for the 1-minute load average to fall to
--max-load, and records the load at which the pair started.
On a host that other sessions load, `nice` does not reach across scheduler autogroups: run it
in its own session with that autogroup's nice lowered instead (BENCHMARKS.md, issue 13):
  setsid bash -c 'echo -20 > /proc/self/autogroup; exec apps/bench/bench_pairs.py ...'
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_ARGS = ["--samples", "200000", "--throughput-ticks", "20000000", "--stats", "on"]


def load1() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def wait_quiet(max_load: float, budget: float) -> float:
    deadline = time.monotonic() + budget
    while load1() > max_load and time.monotonic() < deadline:
        time.sleep(5)
    return load1()


def run_one(binary: str, cpus, extra, json_path: Path) -> dict:
    cmd = [binary, "--rounds", "1", "--sender-cpu", str(cpus[0]), "--receiver-cpu", str(cpus[1]),
           "--json", str(json_path)] + extra
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench_pairs: {binary} failed (exit {r.returncode}):\n{r.stdout[-2000:]}")
    j = json.loads(json_path.read_text())
    lat = j["latency_ns"]
    tp = j["throughput_ticks_per_s_median"]
    fig = {
        "floor": lat["floor_rtt_half"]["p50_ns"],
        "p50": lat["tickrail_shm"]["p50_ns"],
        "p50_floor": j["p50_ratio_to_floor_median"]["tickrail_shm"],
        "tp": tp["tickrail_shm"],
        "tp_spsc": j["throughput_ratio_tickrail_to_spsc_median"],
        "tp_stamped": tp["tickrail_shm_stamped"],
    }
    # --stats both: the counters-off figures are on the round's "counters off" line only.
    m = re.search(r"counters off: p50 +([\d.]+) ns.*throughput +([\d.]+) M/s", r.stdout)
    if m:
        fig["p50_off"] = float(m.group(1))
        fig["tp_off"] = float(m.group(2)) * 1e6
    json_path.with_suffix(".txt").write_text(r.stdout)
    return fig


RATIOS = [("p50", "p50"), ("p50_floor", "p50/floor"), ("tp", "throughput"),
          ("tp_spsc", "throughput/spsc"), ("tp_stamped", "stamped throughput"),
          ("p50_off", "p50, counters off"), ("tp_off", "throughput, counters off")]


def main() -> int:
    ap = argparse.ArgumentParser(
        description="tickrail-bench before and after, in interleaved ABBA pairs on the same cpus",
        epilog="Arguments after -- go to both binaries (default: %s)." % " ".join(DEFAULT_ARGS))
    ap.add_argument("--before", required=True, help="the base tickrail-bench")
    ap.add_argument("--after", required=True, help="the changed tickrail-bench")
    ap.add_argument("--pairs", type=int, default=12, help="pairs to run (default 12)")
    ap.add_argument("--cpus", default="0,1", help="sender,receiver cpu (default 0,1)")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="wait before a pair while the 1-minute load average is above this")
    ap.add_argument("--load-wait", type=float, default=300,
                    help="wait at most this many seconds per pair for the load (default 300)")
    ap.add_argument("--out", default="bench-pairs", help="directory for each run's JSON and output")
    ap.add_argument("bench_args", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for b in (a.before, a.after):
        if not os.access(b, os.X_OK):
            ap.error(f"not an executable: {b}")
    try:
        cpus = [int(c) for c in a.cpus.split(",")]
    except ValueError:
        cpus = []
    if len(cpus) != 2:
        ap.error(f"--cpus wants two cpu numbers, e.g. 0,1 (got '{a.cpus}')")
    if not 1 <= a.pairs <= 1000:
        ap.error("--pairs wants 1..1000")
    extra = a.bench_args or DEFAULT_ARGS
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; uptime: "
          f"{subprocess.run(['uptime'], stdout=subprocess.PIPE, text=True).stdout.strip()}")
    print(f"# before {a.before}\n# after  {a.after}\n# cpus {cpus}; bench args: {' '.join(extra)}")
    pairs = []
    for i in range(a.pairs):
        load = wait_quiet(a.max_load, a.load_wait)
        start = time.strftime("%H:%M:%S", time.gmtime())
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        fig = {}
        for which in order:
            binary = a.before if which == "before" else a.after
            fig[which] = run_one(binary, cpus, extra, out / f"pair{i + 1:02d}-{which}.json")
        pairs.append({"start": start, "load": load, "first": order[0], **fig})
        b, n = fig["before"], fig["after"]
        print(f"# pair {i + 1}: {start} load {load:.2f}, {order[0]} first: p50 {b['p50']:.0f} -> "
              f"{n['p50']:.0f} ns, throughput {b['tp'] / 1e6:.2f} -> {n['tp'] / 1e6:.2f} M/s",
              flush=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; uptime: "
          f"{subprocess.run(['uptime'], stdout=subprocess.PIPE, text=True).stdout.strip()}")

    keys = [(k, name) for k, name in RATIOS if all(k in p["before"] for p in pairs)]
    print("\n| pair | time (UTC) | load | first | floor p50 before / after | p50 before | p50 after "
          "| after/before | throughput before | throughput after | after/before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for i, p in enumerate(pairs):
        b, n = p["before"], p["after"]
        print(f"| {i + 1} | {p['start']} | {p['load']:.2f} | {p['first']} | {b['floor']:.0f} / "
              f"{n['floor']:.0f} ns | {b['p50']:.0f} ns | {n['p50']:.0f} ns | "
              f"{n['p50'] / b['p50']:.3f} | {b['tp'] / 1e6:.2f} M/s | {n['tp'] / 1e6:.2f} M/s | "
              f"{n['tp'] / b['tp']:.3f} |")
    print("\nmedians of the per-pair ratios after/before (min..max):")
    summary = {}
    for k, name in keys:
        r = [p["after"][k] / p["before"][k] for p in pairs]
        summary[k] = statistics.median(r)
        print(f"  {name:26s} {statistics.median(r):.3f}  ({min(r):.3f}..{max(r):.3f})")
    (out / "pairs.json").write_text(json.dumps({"pairs": pairs, "median_ratios": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

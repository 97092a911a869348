#!/usr/bin/env python3
"""tickrail-bench-ud next to perftest, in one run on one device (the rig's Soft-RoCE guest, or
a host with an RDMA NIC): UD latency against `ib_send_lat -c UD -s 64`, throughput against
`ib_send_bw -c UD -s 64`, and the publisher's cost per tick with 1 and with 8 subscribers.
A benchmark, not a test: it fails only when a program fails.

  bench_ud_rig.py BENCH_UD [--iters N] [--count N]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def perftest(tool: str, dev: str, addr: str, extra, timeout: float) -> str:
    exe = shutil.which(tool)
    if exe is None:
        return f"{tool}: not installed"
    port = free_port()
    common = [exe, "-d", dev, "-c", "UD", "-s", "64", "-F", "-p", str(port)] + extra
    server = subprocess.Popen(common, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    out = ""
    try:
        while time.monotonic() < deadline:
            time.sleep(0.5)
            r = subprocess.run(common + [addr], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=max(1, deadline - time.monotonic()))
            out = r.stdout
            if r.returncode == 0 or "Couldn't connect" not in out:
                break
    except subprocess.TimeoutExpired as e:
        out = f"{tool}: did not finish within {timeout:.0f} s\n{e.stdout or ''}"
    try:
        server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    return out


def run(cmd, timeout: float) -> str:
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        print(f"FAIL: {' '.join(map(str, cmd))} exited with {r.returncode}", flush=True)
        sys.exit(1)
    return r.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--count", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--latency-only", action="store_true")
    args = ap.parse_args()
    # As perftest does: RDTSC, even where the CPU does not report it invariant (a TCG guest).
    os.environ.setdefault("TICKRAIL_CLOCK", "tsc")
    dev = os.environ.get("TICKRAIL_RDMA_DEV", "")
    addr = os.environ.get("TICKRAIL_RDMA_ADDR", "")
    if not dev or not addr:
        print("FAIL: no RDMA device: run scripts/rig --suite bench-ud", flush=True)
        return 1
    print(f"== device {dev}, address {addr}", flush=True)

    # Interleaved rounds: the host's speed drifts over minutes, so each round's three figures
    # are taken back to back and compared within the round.
    rows = []
    for r in range(1, args.rounds + 1):
        out = perftest("ib_send_lat", dev, addr, ["-n", str(args.iters)], 120)
        m = re.search(r"^\s*64\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
        send_lat = float(m.group(3)) if m else None
        if send_lat is None:
            print(out, flush=True)
        floor = run([args.exe, "--address", addr, "--device", dev, "--port", 7680, "floor",
                     "--iters", args.iters], 300)
        mf = re.search(r"\(floor\)\s+n=\d+\s+p50\s+([\d.]+)", floor)
        lat = run([args.exe, "--address", addr, "--device", dev, "--idle", "busy_spin", "lat",
                   "--iters", args.iters], 300)
        ml = re.search(r"RTT/2 \(ping-pong\)\s+n=\d+\s+p50\s+([\d.]+)", lat)
        row = (send_lat, float(mf.group(1)) if mf else None, float(ml.group(1)) if ml else None)
        rows.append(row)
        print(f"round {r}: RTT/2 p50 us: ib_send_lat -c UD (unicast) t_typical {row[0]}, raw verbs "
              f"multicast floor {row[1]}, tickrail UD {row[2]}", flush=True)
    good = [x for x in rows if None not in x]
    if good:
        med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
        print(f"== medians over {len(good)} rounds: ib_send_lat {med([x[0] for x in good]):.2f} us, "
              f"floor {med([x[1] for x in good]):.2f} us, tickrail {med([x[2] for x in good]):.2f} us;"
              f" per-round tickrail/ib_send_lat median {med([x[2] / x[0] for x in good]):.2f}x, "
              f"tickrail/floor median {med([x[2] / x[1] for x in good]):.2f}x", flush=True)

    if args.latency_only:
        return 0
    print("== throughput: perftest ib_send_bw -c UD -s 64 (unicast)", flush=True)
    out = perftest("ib_send_bw", dev, addr, ["-n", str(args.count)], 180)
    print(out, flush=True)

    print("== throughput: tickrail-bench-ud fanout, 1 subscriber, 15 ticks/datagram, unpaced",
          flush=True)
    run([args.exe, "--address", addr, "--device", dev, "fanout", "--subscribers", 1,
         "--count", args.count, "--batch", 15], 300)
    print("== throughput: 1 tick/datagram, unpaced", flush=True)
    run([args.exe, "--address", addr, "--device", dev, "--port", 7620, "fanout",
         "--subscribers", 1, "--count", args.count // 4, "--batch", 1], 300)

    print("== publisher cost per tick, paced at 1000 ticks/s, 1 tick/datagram: 1, 2, 4, 8 "
          "subscribers", flush=True)
    for k, port in ((1, 7640), (2, 7650), (4, 7660), (8, 7670)):
        run([args.exe, "--address", addr, "--device", dev, "--port", port, "fanout",
             "--subscribers", k, "--count", 5000, "--batch", 1, "--rate", 1000], 300)
    return 0


if __name__ == "__main__":
    sys.exit(main())

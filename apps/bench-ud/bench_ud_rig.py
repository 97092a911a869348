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
    args = ap.parse_args()
    dev = os.environ.get("TICKRAIL_RDMA_DEV", "")
    addr = os.environ.get("TICKRAIL_RDMA_ADDR", "")
    if not dev or not addr:
        print("FAIL: no RDMA device: run scripts/rig --suite bench-ud", flush=True)
        return 1
    print(f"== device {dev}, address {addr}", flush=True)

    print("== latency: perftest ib_send_lat -c UD -s 64 (unicast; RTT/2)", flush=True)
    out = perftest("ib_send_lat", dev, addr, ["-n", str(args.iters)], 120)
    print(out, flush=True)
    print("== latency: raw verbs UD multicast ping-pong, 128-byte inline datagrams (the floor)",
          flush=True)
    run([args.exe, "--address", addr, "--device", dev, "--port", 7680, "floor",
         "--iters", args.iters], 300)
    for idle in ("busy_spin", "yield"):
        print(f"== latency: tickrail-bench-ud lat --idle {idle} (UD multicast, 64-byte ticks, "
              "128-byte datagrams)", flush=True)
        run([args.exe, "--address", addr, "--device", dev, "--idle", idle, "lat",
             "--iters", args.iters], 300)

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

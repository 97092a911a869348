#!/usr/bin/env python3
"""(b) perftest's ib_write_lat between two processes on the rig's device completes; its
t_typical (RTT/2, perftest's 'typical' latency) is parsed and printed.

  write_lat_test.py [--size 64] [--iters 1000] [--timeout 120] [--peer-job]

Server and client run on this host, the client connecting to TICKRAIL_RDMA_ADDR. With
TICKRAIL_RIG_PEER_DIR set and --peer-job, the server runs in the other guest instead (two-guest
rig) and the client connects to TICKRAIL_RDMA_PEER_ADDR. Every wait is bounded. Without an RDMA
device this fails with "no RDMA device: run scripts/rig".
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig_peer  # noqa: E402

NO_DEVICE = "no RDMA device: run scripts/rig"


def fail(msg: str) -> None:
    print(f"write_lat_test: FAIL: {msg}", flush=True)
    sys.exit(1)


def first_device() -> str:
    dev = os.environ.get("TICKRAIL_RDMA_DEV", "")
    try:
        present = sorted(os.listdir("/sys/class/infiniband"))
    except FileNotFoundError:
        present = []
    if not present:
        fail(NO_DEVICE + " (this host lists no RDMA device)")
    return dev or present[0]


def free_tcp_port() -> int:
    # perftest exchanges its QP data over TCP on this port before the RDMA test.
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    hexport = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if cols[1].endswith(hexport) and cols[3] == "0A":  # 0A = LISTEN
                        return True
        except FileNotFoundError:
            pass
    return False


def parse_result(out: str, size: int):
    # Columns: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 7 and cols[0] == str(size) and re.fullmatch(r"[0-9.]+", cols[4]):
            return {"t_min": float(cols[2]), "t_max": float(cols[3]),
                    "t_typical": float(cols[4]), "t_avg": float(cols[5]),
                    "p99": float(cols[7]) if len(cols) > 7 else None,
                    "p99.9": float(cols[8]) if len(cols) > 8 else None}
    return None


def run_pair(args, dev: str, exe: str, deadline: float):
    """One ib_write_lat server and client; returns (client output, where the server ran)."""
    port = free_tcp_port()
    common = ["-d", dev, "-s", str(args.size), "-n", str(args.iters), "-F", "-p", str(port)]
    if args.peer_job:
        peer = rig_peer.Peer.from_env()
        addr = os.environ.get("TICKRAIL_RDMA_PEER_ADDR") or fail("TICKRAIL_RDMA_PEER_ADDR unset")
        job = peer.submit("ib_write_lat-server", " ".join(["exec", "ib_write_lat"] + common))
        where = f"the peer guest ({addr})"
        # No /proc view of the peer: the client retries until the server listens.
        server = None
    else:
        addr = os.environ.get("TICKRAIL_RDMA_ADDR", "")
        if not addr:
            fail("TICKRAIL_RDMA_ADDR unset: the address of the device's netdev (scripts/rig sets it)")
        server = subprocess.Popen([exe] + common, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        where = "a second process"
        while not listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                out = server.communicate()[0] if server.poll() is not None else ""
                server.kill()
                fail(f"ib_write_lat server did not listen on port {port}:\n{out}")
            time.sleep(0.05)

    client_out = ""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            if server:
                server.kill()
            fail(f"ib_write_lat client did not finish within {args.timeout:.0f}s:\n{client_out}")
        try:
            client = subprocess.run([exe] + common + [addr], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, timeout=left)
        except subprocess.TimeoutExpired as e:
            client_out = e.stdout or ""
            continue
        client_out = client.stdout
        if client.returncode == 0:
            break
        if "Couldn't connect" in client_out and args.peer_job:
            time.sleep(0.5)  # the peer's server is not listening yet
            continue
        if server:
            server.kill()
        fail(f"ib_write_lat client exited with {client.returncode}:\n{client_out}")

    if server:
        try:
            server_out = server.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
        except subprocess.TimeoutExpired:
            server.kill()
            fail("ib_write_lat server did not exit after the client finished")
        if server.returncode != 0:
            fail(f"ib_write_lat server exited with {server.returncode}:\n{server_out}")
    else:
        rc, server_out = job.wait(max(1.0, deadline - time.monotonic()))
        if rc != 0:
            fail(f"ib_write_lat server in the peer guest exited with {rc}:\n{server_out}")
    return client_out, where


def clock_not_calibrated(out: str, size: int) -> bool:
    """perftest converts cycles to microseconds with a CPU frequency it measures by regression;
    under emulation on a loaded host the fit can fail (r^2 < 0.9) and every figure reads inf."""
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0] == str(size) and cols[4] in ("inf", "nan", "-nan"):
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--attempts", type=int, default=3,
                    help="runs allowed when perftest fails to calibrate its clock")
    ap.add_argument("--peer-job", action="store_true")
    args = ap.parse_args()

    dev = first_device()
    exe = shutil.which("ib_write_lat")
    if exe is None:
        fail("ib_write_lat not found (perftest package; scripts/setup installs it)")
    deadline = time.monotonic() + args.timeout

    for attempt in range(1, args.attempts + 1):
        client_out, where = run_pair(args, dev, exe, deadline)
        if not clock_not_calibrated(client_out, args.size):
            break
        print(client_out, flush=True)
        print(f"write_lat_test: attempt {attempt}: ib_write_lat could not calibrate its clock "
              f"(figures read inf){'; again' if attempt < args.attempts else ''}", flush=True)
    else:
        fail(f"ib_write_lat could not calibrate its clock in {args.attempts} runs")

    print(client_out, flush=True)
    res = parse_result(client_out, args.size)
    if res is None:
        fail("no result line for size %d in ib_write_lat's output" % args.size)
    print(f"ib_write_lat -d {dev} -s {args.size} -n {args.iters} to {where}: "
          f"t_typical {res['t_typical']:.2f} us (RTT/2), t_min {res['t_min']:.2f} us, "
          f"t_avg {res['t_avg']:.2f} us, t_max {res['t_max']:.2f} us, "
          f"p99 {res['p99']} us, p99.9 {res['p99.9']} us", flush=True)
    if not res["t_min"] > 0 or res["t_typical"] < res["t_min"]:
        fail(f"implausible figures: {res}")


if __name__ == "__main__":
    main()

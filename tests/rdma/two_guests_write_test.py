#!/usr/bin/env python3
"""Two hosts, for real: rdma_write_check's server runs in the other guest of the two-guest rig
and its client here, connected through rdma_cm across the guests' virtual wire (a QEMU UDP
socket link on the host's loopback); the client RDMA WRITEs two patterns (one WITH IMMEDIATE)
and the server checks every byte and answers with its verdict.

  two_guests_write_test.py PATH/TO/rdma_write_check [--bytes N] [--timeout SECONDS]
"""
import argparse
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig_peer  # noqa: E402

PORT = 7471


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--bytes", type=int, default=1 << 20)
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()

    peer = rig_peer.Peer.from_env()
    peer_addr = os.environ.get("TICKRAIL_RDMA_PEER_ADDR", "")
    if not peer_addr:
        print(f"FAIL: {rig_peer.NEEDS_RIG}")
        return 1
    wait_ms = str(int(args.timeout * 1000 / 2))
    server = peer.submit("rdma_write_check-server",
                         f"exec {args.exe} --server --addr {peer_addr} --port {PORT} "
                         f"--bytes {args.bytes} --timeout-ms {wait_ms}")
    try:
        print(server.wait_output(r"listening on \S+", args.timeout / 2).group(0), flush=True)
        client = subprocess.run([args.exe, "--client", "--addr", peer_addr, "--port", str(PORT),
                                 "--bytes", str(args.bytes), "--timeout-ms", wait_ms],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=args.timeout / 2)
        print(client.stdout, end="", flush=True)
        rc, out = server.wait(args.timeout / 2)
    except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}")
        return 1
    print("peer guest:", out, sep="\n", end="", flush=True)
    if client.returncode != 0 or rc != 0:
        print(f"FAIL: client exited with {client.returncode}, server (peer guest) with {rc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

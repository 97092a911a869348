#!/usr/bin/env python3
"""Interop with rdma-core's mckey on our multicast group, on real verbs.

1. mckey as a receiver joins our group and must receive C of our datagrams (it exits 0 after
   C receive completions; nothing else sends to that group).
2. mckey as a sender sends C datagrams of its own into the group while our publisher streams:
   our subscriber must count at least C foreign datagrams, drop them, and still deliver every
   tick once, in order.

  ud_mckey_test.py UD_PEER [--timeout S]
"""
import argparse
import os
import shutil
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ud_procs import Proc, fail, rig_env  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--timeout", type=float, default=150)
    ap.add_argument("--messages", type=int, default=20)
    args = ap.parse_args()
    _, addr = rig_env()
    mckey = shutil.which("mckey")
    if mckey is None:
        fail("mckey not found (rdmacm-utils)")
    # mckey prints with stdio: line-buffer it so that its progress reaches the log file.
    stdbuf = shutil.which("stdbuf")
    mckey_argv = [stdbuf, "-oL", mckey] if stdbuf else [mckey]
    c = args.messages
    try:
        # 1. mckey receives ours: buffers of 1024 bytes hold any of our datagrams (128 bytes
        # for one tick).
        group = "239.7.7.4"
        rx = Proc("mckey-receiver", mckey_argv + ["-m", group, "-b", addr, "-C", c, "-S", 1024])
        rx.wait_line(r"mckey: joined", 30)
        pub = Proc("publisher", [args.exe, "publish", "--group", group, "--port", 7503,
                                 "--count", 200, "--rate", 50, "--linger-ms", 100])
        code = rx.wait(60)
        pub.wait(60)
        print(rx.output(), end="")
        print(pub.output(), end="")
        if code != 0 or "data transfers complete" not in rx.output():
            fail(f"mckey receiver exited with {code} without receiving {c} of our datagrams")
        print(f"ud_mckey: mckey received {c} of our datagrams on {group}", flush=True)

        # 2. mckey sends into ours.
        group = "239.7.7.5"
        count = 1500
        sub = Proc("subscriber", [args.exe, "subscribe", "--group", group, "--count", count,
                                  "--expect-foreign", c, "--timeout-ms", int(args.timeout * 1000)])
        sub.wait_line(r"subscriber: joined", 30)
        pub = Proc("publisher", [args.exe, "publish", "--group", group, "--port", 7504,
                                 "--count", count, "--rate", 150, "--wait-subscribers", 1,
                                 "--linger-ms", 20000])
        pub.wait_line(r"subscribers connected", 60)
        tx = Proc("mckey-sender", mckey_argv + ["-m", group, "-b", addr, "-s", "-C", c, "-S", 100])
        txcode = tx.wait(60)
        code = sub.wait(args.timeout)
        pub.wait(30)
        print(tx.output(), end="")
        print(pub.output(), end="")
        print(sub.output(), end="")
        if txcode != 0:
            fail(f"mckey sender exited with {txcode}")
        if code != 0:
            fail("our subscriber did not deliver the stream intact with the foreign datagrams "
                 "counted")
        print(f"ud_mckey: mckey's {c} datagrams into {group} were counted foreign and dropped; "
              f"our {count} ticks arrived in order", flush=True)
    except (TimeoutError, RuntimeError) as e:
        Proc.kill_all()
        fail(str(e))
    Proc.kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())

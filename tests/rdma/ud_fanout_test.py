#!/usr/bin/env python3
"""UD fan-out on real verbs: one publisher and S subscriber processes on one multicast group;
each subscriber must deliver all N ticks exactly once, in order, with their content intact.
Subscribers join first; the publisher waits until each has its recovery connection (so each
has seen the stream's first heartbeat and starts at sequence 1), then publishes.

  ud_fanout_test.py UD_PEER [--subscribers 8] [--count N] [--batch T] [--rate R]
                    [--drop-mod M] [--timeout S]
"""
import argparse
import sys
import os
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ud_procs import Proc, fail, rig_env  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--subscribers", type=int, default=8)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=15)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--history", type=int, default=1 << 20)
    ap.add_argument("--drop-mod", type=int, default=0)
    ap.add_argument("--group", default="239.7.7.2")
    ap.add_argument("--port", type=int, default=7501)
    ap.add_argument("--timeout", type=float, default=400)
    args = ap.parse_args()
    rig_env()
    deadline = time.monotonic() + args.timeout
    t0 = time.monotonic()
    try:
        subs = []
        for i in range(args.subscribers):
            argv = [args.exe, "subscribe", "--group", args.group, "--count", args.count,
                    "--timeout-ms", int(args.timeout * 1000)]
            if args.drop_mod:
                argv += ["--drop-mod", args.drop_mod]
            subs.append(Proc(f"subscriber{i}", argv))
        for s in subs:
            s.wait_line(r"subscriber: joined", max(1.0, deadline - time.monotonic()))
        pub = Proc("publisher", [args.exe, "publish", "--group", args.group, "--port", args.port,
                                 "--count", args.count, "--batch", args.batch, "--rate", args.rate,
                                 "--history", args.history,
                                 "--wait-subscribers", args.subscribers,
                                 "--linger-ms", int(args.timeout * 1000)])
        pub.wait_line(r"subscribers connected", max(1.0, deadline - time.monotonic()))
        t_start = time.monotonic()
        codes = [s.wait(deadline - time.monotonic()) for s in subs]
        t_subs = time.monotonic() - t_start
        pcode = pub.wait(min(60, max(1.0, deadline - time.monotonic())))
    except (TimeoutError, RuntimeError) as e:
        Proc.kill_all()
        fail(str(e))
    print(pub.output(), end="")
    for s in subs:
        print(f"[{s.name}] " + s.output().strip().replace("\n", f"\n[{s.name}] "))
    print(f"ud_fanout: {args.subscribers} subscribers x {args.count} ticks "
          f"({args.batch} ticks/datagram): all subscribers done {t_subs:.1f} s after the "
          f"publisher started; whole test {time.monotonic() - t0:.1f} s", flush=True)
    Proc.kill_all()
    bad = [s.name for s, c in zip(subs, codes) if c != 0]
    if bad or pcode != 0:
        fail(f"subscribers failed: {bad}; publisher exited with {pcode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

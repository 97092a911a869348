#!/usr/bin/env python3
"""A UD publisher killed with SIGKILL (no end-of-stream datagram, no goodbye): its subscriber,
having received everything, must report the publisher gone once the heartbeats stop for its
publisher_timeout, with the reason in words. Before that, both are stopped for longer than the
timeout, as a paused VM would be, and the subscriber resumed first: that is no silence of the
publisher's, and the subscriber must still be there after both run again.

  ud_publisher_gone_test.py UD_PEER [--timeout S]
"""
import argparse
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ud_procs import Proc, fail, rig_env  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    rig_env()
    group, count = "239.7.7.3", 500
    deadline = time.monotonic() + args.timeout
    try:
        sub = Proc("subscriber", [args.exe, "subscribe", "--group", group, "--count", count,
                                  "--expect-gone", "--publisher-timeout-ms", 500,
                                  "--timeout-ms", int(args.timeout * 1000)])
        sub.wait_line(r"subscriber: joined", args.timeout)
        pub = Proc("publisher", [args.exe, "publish", "--group", group, "--port", 7502,
                                 "--count", count, "--wait-subscribers", 1, "--heartbeat-ms", 50,
                                 "--hold", "--linger-ms", int(args.timeout * 1000)])
        sub.wait_line(r"subscriber: delivered", max(1.0, deadline - time.monotonic()))
        pub.p.send_signal(signal.SIGSTOP)
        sub.p.send_signal(signal.SIGSTOP)
        time.sleep(2.0)
        sub.p.send_signal(signal.SIGCONT)
        time.sleep(0.1)
        pub.p.send_signal(signal.SIGCONT)
        time.sleep(1.5)  # three of its timeouts, heartbeats flowing again
        if sub.p.poll() is not None:
            raise RuntimeError("after a stop of both, the subscriber took the publisher for gone:\n"
                               + sub.output())
        pub.kill()  # SIGKILL: the heartbeats just stop
        t_kill = time.monotonic()
        code = sub.wait(deadline - time.monotonic())
        t_gone = time.monotonic() - t_kill
    except (TimeoutError, RuntimeError) as e:
        Proc.kill_all()
        fail(str(e))
    out = sub.output()
    print(pub.output(), end="")
    print(out, end="")
    Proc.kill_all()
    if code != 0 or "publisher gone" not in out or "silent for" not in out:
        fail(f"subscriber exited with {code}, without reporting the silent publisher")
    print(f"ud_publisher_gone: subscriber reported the killed publisher gone {t_gone:.2f} s after "
          f"the kill (publisher_timeout 500 ms, heartbeat 50 ms)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

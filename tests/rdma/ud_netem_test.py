#!/usr/bin/env python3
"""UD across two hosts with a lossy wire (two-guest rig): the publisher runs in the peer guest
behind `tc qdisc netem loss 10%` on its NIC, so one datagram in ten (and one packet in ten of
the recovery traffic) is lost on a real network device; the subscriber here must still deliver
every tick once, in order, recovering the lost ones from the publisher's history.

  ud_netem_test.py UD_PEER [--count N] [--rate R] [--loss PCT] [--timeout S]
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig_peer  # noqa: E402
from ud_procs import Proc, fail, rig_env  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--loss", type=float, default=10)
    ap.add_argument("--timeout", type=float, default=220)
    args = ap.parse_args()
    rig_env()
    peer = rig_peer.Peer.from_env()
    peer_addr = rig_peer.Peer.address()
    group = "239.7.7.6"
    deadline = time.monotonic() + args.timeout
    # The peer guest's NIC carries its address; netem on its egress loses what it sends.
    job_cmd = f"""
dev=$(ip -o -4 addr show | awk '$4 ~ /^{peer_addr}\\//{{print $2}}')
[ -n "$dev" ] || {{ echo "no interface with {peer_addr}"; exit 2; }}
command -v tc >/dev/null || {{ echo "tc (iproute2) is missing in the guest image"; exit 2; }}
modprobe sch_netem || {{ echo "sch_netem module missing"; exit 2; }}
tc qdisc add dev "$dev" root netem loss {args.loss}% || exit 2
trap 'tc qdisc del dev "$dev" root' EXIT
echo "netem: $(tc qdisc show dev "$dev")"
{args.exe} publish --group {group} --port 7505 --count {args.count} --rate {args.rate} \\
  --wait-subscribers 1 --linger-ms {int(args.timeout * 1000)}
"""
    try:
        sub = Proc("subscriber", [args.exe, "subscribe", "--group", group, "--count", args.count,
                                  "--timeout-ms", int(args.timeout * 1000)])
        sub.wait_line(r"subscriber: joined", 60)
        job = peer.submit("ud-netem-publisher", job_cmd)
        t0 = time.monotonic()
        code = sub.wait(deadline - time.monotonic())
        secs = time.monotonic() - t0
        rc, out = job.wait(max(5.0, min(60.0, deadline - time.monotonic())))
    except (TimeoutError, RuntimeError) as e:
        Proc.kill_all()
        fail(str(e))
    print("peer guest (publisher):", out, sep="\n", end="")
    print(sub.output(), end="")
    Proc.kill_all()
    if rc == 2:
        fail("netem could not be set up in the peer guest (see its output)")
    if code != 0 or rc != 0:
        fail(f"subscriber exited with {code}, publisher (peer guest) with {rc}")
    print(f"ud_netem: {args.count} ticks at {args.rate:.0f}/s across the guests with "
          f"{args.loss}% netem loss, all delivered in order in {secs:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

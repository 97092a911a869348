#!/usr/bin/env python3
"""Hot failover over two lossy UD lines across two hosts (two-guest rig). The peer guest publishes
every batch on two groups (ud_peer publish --group-b: the same ticks under the same sequence
numbers); on its NIC, `tc netem` loses 10% of line A's datagrams and, independently, 5% of line
B's (a prio qdisc whose bands are chosen by destination group; the recovery traffic is not
lost, and goes through a band of its own, so that its bytes are counted). This guest reads both
lines with a FailoverSubscriber (ud_peer failover): every tick once, in order, with its content,
none lost on both lines, none given up; and recovery runs only for what both lines lost. That is
measured on the wire, whatever the subscriber did with what it read: the READ responses the
publisher sent come to about the ticks lost on both lines (10% x 5% = 0.5% of the stream by the
loss rates, plus what the link between the guests lost on both lines at once, counted from this
guest's receive completions), within a factor of two (a READ takes a run of missing ticks, and a
datagram lost on one line next to one lost on both is read with it); not the 10% and 5% each line
would read alone.

  ud_failover_netem_test.py UD_PEER [--count N] [--rate R] [--batch T] [--loss-a PCT]
                            [--loss-b PCT] [--timeout S]
"""
import argparse
import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig_peer  # noqa: E402
from ud_procs import Proc, fail, rig_env  # noqa: E402

GROUP_A, GROUP_B = "239.7.8.1", "239.7.8.2"


def receives() -> int:
    """Receive completions of this guest's device so far (rxe's hw counter), or -1."""
    dev = os.environ.get("TICKRAIL_RDMA_DEV", "rxe0")
    try:
        with open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/rdma_recvs") as f:
            return int(f.read())
    except (OSError, ValueError):
        return -1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=50_000)
    ap.add_argument("--batch", type=int, default=15)
    ap.add_argument("--loss-a", type=float, default=10)
    ap.add_argument("--loss-b", type=float, default=5)
    ap.add_argument("--timeout", type=float, default=400)
    args = ap.parse_args()
    rig_env()
    peer = rig_peer.Peer.from_env()
    peer_addr = rig_peer.Peer.address()
    deadline = time.monotonic() + args.timeout
    # Bands by destination: 1:1 line A (netem loss A), 1:2 line B (netem loss B), 1:3 the rest.
    job_cmd = f"""
dev=$(ip -o -4 addr show | awk '$4 ~ /^{peer_addr}\\//{{print $2}}')
[ -n "$dev" ] || {{ echo "no interface with {peer_addr}"; exit 2; }}
command -v tc >/dev/null || {{ echo "tc (iproute2) is missing in the guest image"; exit 2; }}
modprobe sch_netem && modprobe sch_prio && modprobe cls_u32 || {{ echo "a qdisc module is missing"; exit 2; }}
tc qdisc add dev "$dev" root handle 1: prio bands 3 priomap 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 || exit 2
trap 'tc qdisc del dev "$dev" root' EXIT
tc qdisc add dev "$dev" parent 1:1 handle 10: netem loss {args.loss_a}% || exit 2
tc qdisc add dev "$dev" parent 1:2 handle 20: netem loss {args.loss_b}% || exit 2
tc qdisc add dev "$dev" parent 1:3 handle 30: pfifo limit 10000 || exit 2
tc filter add dev "$dev" parent 1: protocol ip u32 match ip dst {GROUP_A}/32 flowid 1:1 || exit 2
tc filter add dev "$dev" parent 1: protocol ip u32 match ip dst {GROUP_B}/32 flowid 1:2 || exit 2
{args.exe} publish --group {GROUP_A} --group-b {GROUP_B} --port 7510 --count {args.count} \\
  --batch {args.batch} --rate {args.rate} --history 262144 \\
  --wait-subscribers 1 --linger-ms {int(args.timeout * 1000)}
echo "netem, after the run:"; tc -s qdisc show dev "$dev"
"""
    try:
        sub = Proc("failover", [args.exe, "failover", "--group", GROUP_A, "--group-b", GROUP_B,
                                "--count", args.count, "--timeout-ms", int(args.timeout * 1000),
                                "--recovery-delay-us", 20000, "--hole-timeout-ms", 500])
        sub.wait_line(r"failover: joined", 60)
        recvs0 = receives()
        job = peer.submit("ud-failover-publisher", job_cmd)
        t0 = time.monotonic()
        code = sub.wait(deadline - time.monotonic())
        secs = time.monotonic() - t0
        rc, out = job.wait(max(5.0, min(60.0, deadline - time.monotonic())))
        recvs = receives() - recvs0 if recvs0 >= 0 else -1
    except (TimeoutError, RuntimeError) as e:
        Proc.kill_all()
        fail(str(e))
    print("peer guest (publisher):", out, sep="\n", end="")
    text = sub.output()
    print(text, end="")
    Proc.kill_all()
    if rc == 2:
        fail("netem could not be set up in the peer guest (see its output)")
    if code != 0 or rc != 0:
        fail(f"failover subscriber exited with {code}, publisher (peer guest) with {rc}")
    lines = {m.group(1): (int(m.group(2)), int(m.group(3)))
             for m in re.finditer(r"line ([AB]) first (\d+) duplicates \d+ downs \d+ recovered (\d+)", text)}
    # What netem did to each line: "qdisc netem 10: ... Sent B bytes P pkt (dropped D".
    netem = {h: (int(p), int(d)) for h, p, d in
             re.findall(r"qdisc netem (\d+): .*?\n\s*Sent \d+ bytes (\d+) pkt \(dropped (\d+)", out)}
    rest = re.search(r"qdisc pfifo 30: .*?\n\s*Sent (\d+) bytes", out)
    if len(netem) != 2 or not rest:
        fail("the peer guest's qdisc statistics are missing from its output")
    # RDMA READ responses: 64 bytes a tick, plus 62 bytes of RoCEv2 headers per 1024-byte packet.
    wire_ticks = int(int(rest.group(1)) / (64 * (1 + 62 / 1024)))
    passed = sum(p for p, _ in netem.values())
    dropped = ", ".join(f"line {'A' if h == '10' else 'B'} {d} of {p + d} datagrams ({100.0 * d / max(1, p + d):.1f}%)"
                        for h, (p, d) in sorted(netem.items()))
    if len(lines) != 2:
        fail("the failover subscriber's per-line counters are missing from its output")
    read = lines["A"][1] + lines["B"][1]
    expected = args.count * args.loss_a / 100 * args.loss_b / 100
    one_line = args.count * (args.loss_a + args.loss_b) / 100
    link_lost = max(0, sum(p for p, _ in netem.values()) - recvs) * args.batch if recvs >= 0 else 0
    print(f"ud_failover_netem: {args.count} ticks at {args.rate:.0f}/s over two lines losing "
          f"{args.loss_a}% and {args.loss_b}%: all delivered once, in order, in {secs:.1f} s; first "
          f"copies A {lines['A'][0]}, B {lines['B'][0]}; read back {read} ticks (A {lines['A'][1]}, "
          f"B {lines['B'][1]}), {100.0 * read / args.count:.3f}% of the stream, against "
          f"{100.0 * expected / args.count:.3f}% lost on both lines by the loss rates "
          f"(each line alone would read about {one_line:.0f}); netem dropped {dropped}; this guest's "
          f"device completed {recvs} receives of the {passed} datagrams netem let through (those missing, "
          f"about {link_lost} ticks, were lost between the guests or for want of a posted receive "
          f"buffer, likely on both lines at once); recovery traffic from the publisher: about "
          f"{wire_ticks} ticks' worth", flush=True)
    # Recovery only for what both lines lost, as the wire saw it.
    if wire_ticks > 2 * (expected + link_lost) + 1000:
        fail(f"about {wire_ticks} ticks read over the wire, against {expected + link_lost:.0f} lost on "
             f"both lines: recovery ran for ticks one line brought")
    return 0


if __name__ == "__main__":
    sys.exit(main())

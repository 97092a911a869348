#!/usr/bin/env python3
"""The RC transport across two hosts: an rc_peer publisher in the other guest of the two-guest
rig, an rc_peer subscriber here, connected through rdma_cm over the guests' virtual wire (with
an access token). Each polling mode streams its ticks; the subscriber checks every tick's
order and payload, and both sides must agree on the count. Then a publisher that closes right
after one burst, its send queue still full behind a netem delay, must have written all of it.

  rc_two_guests_test.py PATH/TO/rc_peer [--ticks N] [--timeout SECONDS]
"""
import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig_peer  # noqa: E402


def run_mode(peer, exe, peer_addr, port, polling, ticks, timeout) -> bool:
    common = ["--channel", "rc-two-guests", "--token", "two-guests", "--addr", peer_addr]
    job = peer.submit(f"rc_peer-pub-{polling}",
                      " ".join(["exec", exe, "pub", "--port", str(port), "--subs", "1",
                                "--ticks", str(ticks), "--batch", "64",
                                "--timeout-ms", str(int(timeout * 1000))] + common))
    try:
        print(job.wait_output(r"listening \d+", timeout / 3).group(0), flush=True)
        sub = subprocess.run([exe, "sub", "--port", str(port), "--polling", polling, "--split",
                              "--ticks", str(ticks), "--timeout-ms", str(int(timeout * 1000))]
                             + common, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=timeout)
        print(sub.stdout, end="", flush=True)
        rc, out = job.wait(timeout / 3)
    except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL ({polling}): {e}")
        return False
    print(f"peer guest ({polling}):", out, sep="\n", end="", flush=True)
    done = re.search(r"done received=(\d+) lost=(\d+)", sub.stdout)
    published = re.search(r"published (\d+)", out)
    ok = (sub.returncode == 0 and rc == 0 and done is not None and published is not None
          and int(done.group(1)) == ticks and int(done.group(2)) == 0
          and int(published.group(1)) == ticks)
    print(f"{'ok' if ok else 'FAIL'}: {polling} polling, {ticks} ticks from the peer guest "
          f"(subscriber exit {sub.returncode}, publisher exit {rc})", flush=True)
    return ok


def run_close_at_once(peer, exe, peer_addr, port, ticks, timeout) -> bool:
    """A publisher that closes right after one burst while its send queue is still full (netem
    delays what the peer guest sends, so completions come late): close() must write what
    publish() accepted before it says "closed", and the subscriber must get every tick."""
    common = ["--channel", "rc-close-at-once", "--token", "two-guests", "--addr", peer_addr]
    job = peer.submit("rc_peer-pub-close", f"""
dev=$(ip -o -4 addr show | awk '$4 ~ /^{peer_addr}\\//{{print $2}}')
[ -n "$dev" ] || {{ echo "no interface with {peer_addr}"; exit 2; }}
modprobe sch_netem || {{ echo "sch_netem module missing"; exit 2; }}
tc qdisc add dev "$dev" root netem delay 20ms || exit 2
trap 'tc qdisc del dev "$dev" root' EXIT
{exe} pub --port {port} --subs 1 --ticks {ticks} --batch {ticks} --close-at-once \
  --timeout-ms {int(timeout * 1000)} {" ".join(common)}
""")
    try:
        job.wait_output(r"listening \d+", timeout / 3)
        sub = subprocess.run([exe, "sub", "--port", str(port), "--polling", "memory", "--split",
                              "--capacity", "4096", "--ticks", str(ticks),
                              "--timeout-ms", str(int(timeout * 1000))] + common,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        print(sub.stdout, end="", flush=True)
        rc, out = job.wait(timeout / 3)
    except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL (close at once): {e}")
        return False
    print("peer guest (close at once):", out, sep="\n", end="", flush=True)
    done = re.search(r"done received=(\d+) lost=(\d+)", sub.stdout)
    ok = (rc == 0 and done is not None and int(done.group(1)) == ticks and int(done.group(2)) == 0
          and re.search(r"published (\d+)", out) is not None)
    print(f"{'ok' if ok else 'FAIL'}: a publisher closing right after a burst of {ticks} ticks, its "
          f"send queue full behind a 20 ms netem delay: all of them arrived "
          f"({done.group(1) if done else '?'}; subscriber exit {sub.returncode}, publisher exit {rc})",
          flush=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--ticks", type=int, default=20000)
    ap.add_argument("--timeout", type=float, default=100.0)
    args = ap.parse_args()
    peer = rig_peer.Peer.from_env()
    peer_addr = os.environ.get("TICKRAIL_RDMA_PEER_ADDR", "")
    if not peer_addr:
        print(f"FAIL: {rig_peer.NEEDS_RIG}")
        return 1
    ok = run_mode(peer, args.exe, peer_addr, 7481, "cq", args.ticks, args.timeout)
    ok = run_mode(peer, args.exe, peer_addr, 7482, "memory", args.ticks // 4, args.timeout) and ok
    ok = run_close_at_once(peer, args.exe, peer_addr, 7483, 2000, args.timeout) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

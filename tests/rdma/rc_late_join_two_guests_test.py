#!/usr/bin/env python3
"""Late join with the market's state over RC across two hosts (docs/state.md), with the programs
as a user runs them: tickrail-replay --book --state publishes a synthetic feed of 1,000
instruments in the other guest of the two-guest rig; here, one tickrail-jitter is there from the
start, and a second joins mid-stream with --start snapshot, reading the publisher's last-value
table over the wire with RDMA READ. Both must end with the same view of every instrument
(--state-out), the late one having taken the table and then every live tick after it, none
lost and none twice.

  rc_late_join_two_guests_test.py REPLAY JITTER [--rate N] [--messages N] [--timeout SECONDS]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig_peer  # noqa: E402

PORT = 7493


def configs(d: str, address: str, timeout_s: float):
    """The channel's config for both sides, and the publisher's own."""
    common, publisher = os.path.join(d, "rc.toml"), os.path.join(d, "publisher.toml")
    # Memory polling (a snapshot needs it over RC), with the commit word in a second WRITE: rxe
    # does not report in-order placement. The guests stall for seconds when their host is busy.
    with open(common, "w", encoding="ascii") as f:
        f.write(f'transport = "rc"\n[rdma]\naddress = "{address}"\nport = {PORT}\n'
                f'polling = "memory"\nsplit_commit = true\nconnect_timeout_ms = 20000\n'
                f'[subscriber]\npublisher_timeout_ms = {int(timeout_s * 1000)}\n')
    with open(publisher, "w", encoding="ascii") as f:
        # It waits (bounded) for both subscribers to catch up before it closes. Its table is sized
        # to the feed: 1,024 instruments' entries (196 kB) are READ twice in well under a second
        # on rxe; the default 65,536 (12 MB) take longer than this stream lasts.
        f.write(f'[replay]\ndrain_timeout_ms = {int(timeout_s * 500)}\n[state]\ncapacity = 1024\n')
    return common, publisher


def check(ok: bool, what: str) -> bool:
    print(f"{'ok' if ok else 'FAIL'}: {what}", flush=True)
    return ok


def slurp(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("replay")
    ap.add_argument("jitter")
    ap.add_argument("--rate", type=int, default=800, help="ticks a second")
    ap.add_argument("--messages", type=int, default=30000, help="synthetic input messages")
    ap.add_argument("--timeout", type=float, default=150.0)
    args = ap.parse_args()
    peer = rig_peer.Peer.from_env()
    peer_addr = rig_peer.Peer.address()
    channel = f"late-join-{os.getpid()}"
    with tempfile.TemporaryDirectory(dir=os.path.dirname(peer.jobs)) as d:
        # 30 s: the late joiner's snapshot over these guests' link took 0.3-9.3 s in CI runs, and
        # a publisher_timeout of 10 s once gave it up (the snapshot waits that long for progress).
        cfg, pub_cfg = configs(d, peer_addr, 30.0)
        replay_json = os.path.join(d, "replay.json")
        job = peer.submit("replay-state",
                          " ".join(["exec", args.replay, "-c", cfg, "-c", pub_cfg, "--channel", channel, "--book", "--state",
                                    "--instruments", "1000", "--rate", str(args.rate), "--count",
                                    str(args.messages), "--wait-subscribers", "1", "--wait-timeout-ms", "60000",
                                    "--quiet", "--json", replay_json]))

        def jitter(name, extra):
            log = open(os.path.join(d, name + ".log"), "w", encoding="utf-8")
            cmd = [args.jitter, "-c", cfg, "--channel", channel, "--attach-timeout-ms", "60000",
                   "--json", os.path.join(d, name + ".json"), "--state-out", os.path.join(d, name + "-state.json")]
            return subprocess.Popen(cmd + extra, stdout=log, stderr=subprocess.STDOUT), log

        keeper, keeper_log = jitter("keeper", [])
        late = None
        late_log = None
        try:
            # Once the stream flows (the keeper's live line counts ticks), the late one joins.
            deadline = time.monotonic() + args.timeout / 2
            while not re.search(r"total [1-9]", slurp(os.path.join(d, "keeper.log"))):
                if time.monotonic() > deadline or keeper.poll() is not None or job.status() is not None:
                    print("FAIL: the stream never flowed to the keeper:\n" + slurp(os.path.join(d, "keeper.log"))
                          + "\npeer guest:\n" + job.output(), flush=True)
                    return 1
                time.sleep(0.1)
            time.sleep(2.0)
            joined_at = time.monotonic()
            late, late_log = jitter("late", ["--start", "snapshot", "--quiet"])
            rc_keeper = keeper.wait(timeout=args.timeout)
            rc_late = late.wait(timeout=max(10.0, args.timeout - (time.monotonic() - joined_at)))
            rc_replay, out = job.wait(args.timeout / 3)
        except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"FAIL: {e}", flush=True)
            for p in (keeper, late):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
            return 1
        finally:
            keeper_log.close()
            if late_log is not None:
                late_log.close()
        print("peer guest:", out, sep="\n", end="", flush=True)
        print("late joiner:", slurp(os.path.join(d, "late.log")), sep="\n", end="", flush=True)
        ok = check(rc_replay == 0 and rc_keeper == 0 and rc_late == 0,
                   f"replay in the peer guest, keeper and late joiner here all exit 0 "
                   f"({rc_replay}, {rc_keeper}, {rc_late})")
        if not ok:
            print("keeper:\n" + slurp(os.path.join(d, "keeper.log")), flush=True)
            return 1
        rep = json.loads(slurp(replay_json))
        k = json.loads(slurp(os.path.join(d, "keeper.json")))
        lj = json.loads(slurp(os.path.join(d, "late.json")))
        published = rep["ticks_published"]
        lags = [s["lag"] for s in rep["subscribers"]]
        ok = check(lags == [0, 0], f"the publisher saw both subscribers take every tick before it closed "
                                   f"(lags {lags}: their credit returned once the stream paused)") and ok
        ok = check(k["lost"] == 0 and k["count"] == published,
                   f"the keeper received all {published} ticks ({k['count']}, lost {k['lost']})") and ok
        t = lj["table"]
        print("late joiner's table counters:", json.dumps(t), flush=True)
        ok = check(t["snapshot"] is True and t["snapshot_entries"] > 0 and lj["start_seq"] > 1,
                   f"the late one started from a snapshot of {t['snapshot_entries']} entries at sequence "
                   f"{lj['start_seq']}") and ok
        ok = check(lj["lost"] == 0 and lj["count"] == published + 1 - lj["first_seq"],
                   f"then every live tick from {lj['first_seq']} to {published}, none lost "
                   f"({lj['count']} ticks, lost {lj['lost']})") and ok
        ks = json.loads(slurp(os.path.join(d, "keeper-state.json")))
        ls = json.loads(slurp(os.path.join(d, "late-state.json")))
        ok = check(len(ks["instruments"]) > 900 and ks["position"] == published + 1,
                   f"the keeper's view holds {len(ks['instruments'])} instruments at position {ks['position']}") and ok
        ok = check(ls == ks, "the late joiner's view equals the keeper's, instrument by instrument") and ok
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

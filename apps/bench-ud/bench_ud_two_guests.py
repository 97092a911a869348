#!/usr/bin/env python3
"""UD across the two-guest rig (scripts/rig --two-guests): what crosses a network device.

In one Soft-RoCE guest, unicast to the host's own address takes rxe's loopback shortcut while
multicast goes out through the IP stack and is copied back to each local queue pair by the
sending kernel, on the publisher's own system call. Across two guests both cross the wire and
the copy to each subscriber is made by the receiving host, as a switch would. So this measures:
  - RTT/2: perftest's `ib_send_lat -c UD -s 64` (unicast), the same ping-pong in raw verbs
    over multicast (tickrail-bench-ud floor --remote: the floor) and tickrail-jitter's UD
    ping-pong, the far end in the other guest each time;
  - the publisher's CPU time inside publish() per tick, 1 tick per datagram, paced, with 1, 2,
    4 and 8 subscriber processes in the other guest.
A benchmark, not a test: it fails only when a program fails. Run from the build dir in guest 1:

  scripts/rig --two-guests --command 'python3 ../apps/bench-ud/bench_ud_two_guests.py'
"""
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "rdma"))
import rig_peer  # noqa: E402

BENCH = "apps/bench-ud/tickrail-bench-ud"
JITTER = "apps/jitter/tickrail-jitter"


def sh(cmd, timeout):
    r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout


def main() -> int:
    addr = os.environ.get("TICKRAIL_RDMA_ADDR", "")
    dev = os.environ.get("TICKRAIL_RDMA_DEV", "")
    peer_addr = os.environ.get("TICKRAIL_RDMA_PEER_ADDR", "")
    if not addr or not peer_addr:
        print(f"FAIL: {rig_peer.NEEDS_RIG}", flush=True)
        return 1
    peer = rig_peer.Peer.from_env()
    os.environ.setdefault("TICKRAIL_CLOCK", "tsc")  # as perftest: RDTSC (see bench_ud_rig.py)
    # The peer guest runs with the same clock choice (the publish path reads the clock).
    clock = f"export TICKRAIL_CLOCK={os.environ.get('TICKRAIL_CLOCK', 'auto')}; "
    iters = int(os.environ.get("ITERS", "5000"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    print(f"== guest 1 {addr} ({dev}), guest 2 {peer_addr}; clock "
          f"{os.environ.get('TICKRAIL_CLOCK', 'auto')}", flush=True)

    for r in range(1, rounds + 1):
        port = 18700 + r
        job = peer.submit(f"send-lat-{r}", clock + f"ulimit -l unlimited; timeout 120 ib_send_lat -d "
                          f"$TICKRAIL_RDMA_DEV -c UD -s 64 -F -n {iters} -p {port}")
        time.sleep(3)
        out = ""
        for _ in range(10):
            rc, out = sh(f"timeout 120 ib_send_lat -d {dev} -c UD -s 64 -F -n {iters} -p {port} "
                         f"{peer_addr}", 130)
            if rc == 0 or "Couldn't connect" not in out:
                break
            time.sleep(1)
        job.wait(130)
        m = re.search(r"^\s*64\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
        print(f"round {r}: ib_send_lat -c UD: " +
              (f"t_min {m.group(1)} t_typical {m.group(3)} us" if m else "failed:\n" + out[-600:]),
              flush=True)

        pong = peer.submit(f"floor-pong-{r}", clock + f"ulimit -l unlimited; {BENCH} --address "
                           f"{peer_addr} --timeout 100 floor-pong")
        pong.wait_output(r"floor-pong: joined", 60)
        rc, out = sh(f"ulimit -l unlimited; {BENCH} --address {addr} --timeout 100 floor --remote "
                     f"--iters {iters}", 150)
        pong.wait(150)
        m = re.search(r"p50\s+([\d.]+)", out)
        print(f"round {r}: raw verbs UD multicast floor RTT/2: " +
              (f"p50 {m.group(1)} us" if rc == 0 and m else "failed:\n" + out[-600:]), flush=True)

        conf = f"/tmp/ud-pp{r}.toml"
        with open(conf, "w", encoding="utf-8") as f:
            f.write(f'transport = "ud"\nchannel = "udpp{r}"\n[rdma]\naddress = "{addr}"\n'
                    f'port = {7700 + 10 * r}\ngroups = ["239.8.{r}.1"]\n')
        echo = peer.submit(f"echo-{r}", f"cat > {conf} <<'T'\n{open(conf).read()}T\n"
                           f"{clock}ulimit -l unlimited; timeout 200 {JITTER} -c {conf} --mode echo "
                           f"--echo-address {peer_addr}")
        rc, out = sh(f"ulimit -l unlimited; rm -f /tmp/ud-pp.json; {JITTER} -c {conf} --mode "
                     f"pingpong --echo-address {peer_addr} --count {iters} --warmup 500 "
                     f"--attach-timeout-ms 60000 --quiet --json /tmp/ud-pp.json", 240)
        echo.wait(60)
        if rc != 0 or not os.path.exists("/tmp/ud-pp.json"):
            print(f"round {r}: tickrail UD ping-pong failed:\n{out[-1500:]}", flush=True)
            return 1
        j = json.load(open("/tmp/ud-pp.json"))
        print(f"round {r}: tickrail UD ping-pong RTT/2: count {j['count']} timeouts "
              f"{j['timeouts']} min {j['min_ns'] / 1e3:.2f} p50 {j['p50_ns'] / 1e3:.2f} "
              f"p99 {j['p99_ns'] / 1e3:.2f} us", flush=True)

    print("== publisher CPU per tick, 1 tick/datagram, 1000 ticks/s, subscribers in guest 2",
          flush=True)
    # Rounds alternate the order of 1, 2, 4, 8, so that a drift in the host's speed over the
    # run does not pass for a trend with the number of subscribers.
    cpu = {1: [], 2: [], 4: [], 8: []}
    port = 7800
    for r in range(int(os.environ.get("FANOUT_ROUNDS", "3"))):
        for k in ((1, 2, 4, 8) if r % 2 == 0 else (8, 4, 2, 1)):
            port += 2
            job = peer.submit(f"subs-{r}-{k}", clock + f"ulimit -l unlimited; timeout 280 {BENCH} "
                              f"--address {peer_addr} --timeout 240 subscribe --subscribers {k} "
                              f"--count 5000 2>&1 | grep --line-buffered -v ' info tickrail'")
            job.wait_output(r"subscriber\(s\) joined", 120)
            rc, out = sh(f"ulimit -l unlimited; {BENCH} --address {addr} --port {port} --timeout "
                         f"240 fanout --remote --subscribers {k} --count 5000 --batch 1 --rate 1000 "
                         f"2>&1 | grep --line-buffered -v ' info tickrail'", 300)
            jrc, jout = job.wait(300)
            print(out, end="")
            print("guest 2:", jout, sep="\n", end="", flush=True)
            if rc != 0 or jrc != 0:
                print(f"FAIL: fanout with {k} remote subscriber(s): publisher {rc}, "
                      f"subscribers {jrc}")
                return 1
            m = re.search(r"thread CPU in publish\(\) ([\d.]+) ns/tick", out)
            if m:
                cpu[k].append(float(m.group(1)) / 1000)
    if all(cpu.values()):
        med = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
        print("== publisher CPU per tick inside publish(), us, median of "
              f"{len(cpu[1])} rounds: " + ", ".join(f"{k} sub: {med[k]:.1f}" for k in cpu) +
              f"; 8/1 = {med[8] / med[1]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

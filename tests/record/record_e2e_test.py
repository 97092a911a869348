#!/usr/bin/env python3
"""Recording end to end over one transport, with the programs as a user runs them:

  1. tickrail-replay of an ITCH file (made here with make_itch: CI has no ../shared) with --book
     at full speed (--max) into tickrail-record with policy block: every tick published is
     recorded, no gap, the file closed cleanly;
  2. that recording replayed (auto-detected) into a second tickrail-record (zstd) reproduces it
     exactly: the two CSV exports are identical (docs/recording.md's compare command, cmp);
  3. a tickrail-record killed with kill -9 mid-stream leaves a readable prefix: --info exits 0 and
     says where and why it stops, --csv exports the prefix and exits 1, tickrail-replay replays
     the prefix and exits 1;
  4. (shm, as root) a real full disk: recording into a 2 MiB tmpfs ends with exit 1 and a message
     naming the file and "No space left on device"; the file is readable up to its last complete
     block, every tick in it in order. Without root (or where mount is refused) it says so and
     skips.

  record_e2e_test.py TRANSPORT REPLAY RECORD MAKE_ITCH
TRANSPORT is shm in the unit suite; the rig's `record` suite runs rc and ud on one guest, with a
config naming the transport and the rig's address (TICKRAIL_RDMA_ADDR, TICKRAIL_RDMA_DEV), and a
tenth of the input (Soft-RoCE under an emulated CPU moves a few thousand datagrams a second).
Every wait is bounded.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

WAIT_S = 120


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=WAIT_S, **kw)


def check(cond, what, *outputs):
    if not cond:
        print("FAIL:", what)
        for o in outputs:
            print(o)
        sys.exit(1)
    print("ok:", what)


def full_disk(d, tag, replay, record):
    """4. A disk that fills mid-recording: a real filesystem's ENOSPC, not a simulated one."""
    mnt = os.path.join(d, "small")
    os.mkdir(mnt)
    if os.geteuid() != 0:
        print("skip: the full-disk check mounts a tmpfs and needs root")
        return
    m = run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt])
    if m.returncode != 0:
        print("skip: mount of a 2 MiB tmpfs refused here:", m.stderr.strip())
        return
    try:
        out = os.path.join(mnt, "full.rec")
        rec = subprocess.Popen([record, "--channel", tag + "-5", "--policy", "block", "-q", "--attach-timeout-ms",
                                "30000", "--json", os.path.join(d, "full.json"), out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pub = run([replay, "--channel", tag + "-5", "--max", "--count", "200000", "-q", "--wait-subscribers", "1",
                   "--wait-timeout-ms", "30000", "--json", os.path.join(d, "full-pub.json")])
        rout, rerr = rec.communicate(timeout=WAIT_S)
        check(rec.returncode == 1 and rerr.count("No space left on device") == 1 and out in rerr,
              f"recording into a full 2 MiB tmpfs exits 1 naming the file and the cause ({rec.returncode})",
              rout, rerr, pub.stderr)
        info = run([record, "--info", "--json", os.path.join(d, "info5.json"), out])
        j = json.load(open(os.path.join(d, "info5.json")))
        check(info.returncode == 0 and not j["clean"] and 0 < j["ticks"] < 200000,
              f"--info reads the full disk's file up to its last complete block ({j.get('ticks')} ticks)",
              info.stdout, info.stderr)
        csv = os.path.join(d, "full.csv")
        rc = run([record, "--csv", csv, out])
        with open(csv) as f:
            next(f)
            seqs = [int(line.split(",", 1)[0]) for line in f]
        check(rc.returncode == 1 and seqs == list(range(1, j["ticks"] + 1)),
              "its ticks are the stream's first ones, in order, none missing", rc.stderr)
    finally:
        run(["umount", mnt])


def main():
    transport, replay, record, make_itch = sys.argv[1:5]
    rdma = transport != "shm"
    tag = f"rec-e2e-{transport}-{os.getpid()}"
    with tempfile.TemporaryDirectory() as d:
        # The counters files go with the directory, the kill -9'd recorder's too.
        os.environ["TICKRAIL_STAT_DIR"] = d
        common = ["--transport", transport]
        if rdma:
            cfg = os.path.join(d, "rig.toml")
            with open(cfg, "w") as f:
                # A guest starved by its host can stall a process for over a second.
                f.write(f'transport = "{transport}"\n[rdma]\naddress = "{os.environ["TICKRAIL_RDMA_ADDR"]}"\n'
                        f'device = "{os.environ.get("TICKRAIL_RDMA_DEV", "")}"\n'
                        '[subscriber]\npublisher_timeout_ms = 5000\n')
            common += ["-c", cfg]
        itch = os.path.join(d, "in.itch")
        r = run([make_itch, itch, "20000" if rdma else "200000"])
        check(r.returncode == 0, "make_itch wrote the input", r.stderr)

        # 1. ITCH --book --max -> tickrail-record, policy block.
        first = os.path.join(d, "first.rec")
        rec = subprocess.Popen([record] + common + ["--channel", tag + "-1", "--policy", "block", "-q",
                                "--attach-timeout-ms", "30000", "--json", os.path.join(d, "rec1.json"), first],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rep = run([replay] + common + ["--channel", tag + "-1", "--book", "--max", "-q", "--wait-subscribers", "1",
                   "--wait-timeout-ms", "30000", "--json", os.path.join(d, "rep1.json"), itch])
        out, err = rec.communicate(timeout=WAIT_S)
        check(rep.returncode == 0, "replay of the ITCH file exits 0", rep.stdout, rep.stderr)
        check(rec.returncode == 0, "tickrail-record exits 0 when the publisher closes", out, err)
        published = json.load(open(os.path.join(d, "rep1.json")))["ticks_published"]
        summary = json.load(open(os.path.join(d, "rec1.json")))
        check(published > 1000, f"the book published quotes ({published})")
        check(summary["recorded"] == published and summary["missing"] == 0 and summary["dropped"] == 0,
              f"every tick recorded: {summary['recorded']} of {published}, none missing or dropped", out)
        info = run([record, "--info", "--json", os.path.join(d, "info1.json"), first])
        j = json.load(open(os.path.join(d, "info1.json")))
        check(info.returncode == 0 and j["clean"] and j["ticks"] == published and j["first_seq"] == 1
              and j["last_seq"] == published and j["missing"] == 0,
              "--info: closed cleanly, sequence 1..N, no gaps", info.stdout, info.stderr)

        # 2. The recording replayed (auto-detected) into a second recorder reproduces it.
        second = os.path.join(d, "second.rec")
        rec = subprocess.Popen([record] + common + ["--channel", tag + "-2", "--policy", "block", "-q", "--compress",
                                "--attach-timeout-ms", "30000", second],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rep = run([replay] + common + ["--channel", tag + "-2", "--max", "-q", "--wait-subscribers", "1",
                   "--wait-timeout-ms", "30000", first])
        out, err = rec.communicate(timeout=WAIT_S)
        check(rep.returncode == 0 and rec.returncode == 0, "replay of the recording into a second recorder",
              rep.stdout, rep.stderr, out, err)
        a, b = os.path.join(d, "first.csv"), os.path.join(d, "second.csv")
        ra = run([record, "--csv", a, first])
        rb = run([record, "--csv", b, second])
        check(ra.returncode == 0 and rb.returncode == 0, "both exported to CSV", ra.stderr, rb.stderr)
        cmp = run(["cmp", a, b])
        check(cmp.returncode == 0, "the two CSV exports are identical (cmp)", cmp.stdout)
        lines = sum(1 for _ in open(a)) - 1
        check(lines == published, f"the CSV holds every tick ({lines})")
        size = os.path.getsize(first)
        onto = run([record, "--csv", first, "--force", first])
        check(onto.returncode == 2 and "is the recording itself" in onto.stderr and os.path.getsize(first) == size,
              "--csv onto the recording itself is refused, the recording untouched", onto.stderr)

        # 3. kill -9 mid-stream leaves a readable prefix.
        killed = os.path.join(d, "killed.rec")
        rec = subprocess.Popen([record] + common + ["--channel", tag + "-3", "--policy", "block", "-q",
                                "--attach-timeout-ms", "30000", killed],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pub = subprocess.Popen([replay] + common + ["--channel", tag + "-3", "--rate", "50000" if rdma else "200000",
                                "--count", "0",
                                "-q", "--wait-subscribers", "1", "--wait-timeout-ms", "30000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + WAIT_S
        enough = 300_000 if rdma else 1_000_000
        probe = os.path.join(d, "probe.json")

        def complete_blocks():  # the file's size alone does not say a block is whole: a large one
            # reaches the disk in several writes
            if not os.path.exists(killed) or os.path.getsize(killed) < enough:
                return 0
            run([record, "--info", "--json", probe, killed])
            return json.load(open(probe))["blocks"] if os.path.exists(probe) else 0

        while time.monotonic() < deadline and complete_blocks() < 2:
            time.sleep(0.05)
        size = os.path.getsize(killed) if os.path.exists(killed) else 0
        rec.send_signal(signal.SIGKILL)
        rec.communicate(timeout=WAIT_S)
        pub.send_signal(signal.SIGINT)
        pub.communicate(timeout=WAIT_S)
        check(size >= enough, f"the recorder wrote {size} bytes before kill -9")
        info = run([record, "--info", "--json", os.path.join(d, "info3.json"), killed])
        j = json.load(open(os.path.join(d, "info3.json")))
        # The kill lands between two blocks (no trailer: "not closed") or while a block is being
        # written (its payload "cut short"): both are a file not closed cleanly.
        def not_closed(text):
            return "not closed" in text or "cut short" in text
        check(info.returncode == 0 and not j["clean"] and not_closed(j["stop_reason"]) and j["ticks"] > 0,
              f"--info of the killed file exits 0: {j.get('stop_reason')}", info.stdout, info.stderr)
        check("NOT closed cleanly" in info.stdout and "byte" in info.stdout, "--info says where and why it stops",
              info.stdout)
        k = os.path.join(d, "killed.csv")
        rk = run([record, "--csv", k, killed])
        check(rk.returncode == 1 and sum(1 for _ in open(k)) - 1 == j["ticks"],
              "--csv of the killed file writes the prefix and exits 1", rk.stderr)
        rp = run([replay, "--channel", tag + "-4", "--max", "-q", "--wait-subscribers", "0", "--json",
                  os.path.join(d, "rep4.json"), killed])
        rj = json.load(open(os.path.join(d, "rep4.json")))
        check(rp.returncode == 1 and rj["ticks_published"] == j["ticks"] and not_closed(rp.stderr),
              "tickrail-replay of the killed file replays the prefix, then exits 1", rp.stdout, rp.stderr)

        if not rdma:
            full_disk(d, tag, replay, record)
    print("record e2e over", transport, ": all checks passed")


if __name__ == "__main__":
    main()

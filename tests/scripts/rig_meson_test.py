#!/usr/bin/env python3
"""scripts/rig-meson against logs made here: counts over a run and its re-run, which tests a re-run
takes, and which console lines are a guest kernel's failure (the real lines of a CI run whose
guest's virtual NIC stopped, then oopsed in rdma_rxe) and which are not.

  rig_meson_test.py RIG_MESON
"""
import json
import os
import subprocess
import sys
import tempfile

RIG_MESON = sys.argv[1]
failures = []
checks = 0


def run(*args):
    p = subprocess.run([sys.executable, RIG_MESON, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, check=False)
    return p.returncode, p.stdout.strip()


def check(what, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def testlog(path, entries, cut=False):
    with open(path, "w", encoding="utf-8") as f:
        for name, result in entries:
            f.write(json.dumps({"name": f"tickrail:rdma2 / {name}", "result": result}) + "\n")
        if cut:  # a guest killed while meson wrote its line
            f.write('{"name": "tickrail:rdma2 / cut", "res')


with tempfile.TemporaryDirectory() as d:
    first = os.path.join(d, "first.json")
    second = os.path.join(d, "second.json")
    testlog(first, [("a", "OK"), ("b", "FAIL"), ("c", "TIMEOUT"), ("s", "SKIP")], cut=True)
    testlog(second, [("b", "OK"), ("c", "FAIL"), ("d", "OK")])

    check("counts, one log (the cut line not counted)", run("counts", first), (0, "1 2 1"))
    check("counts, a run then its re-run: last result wins", run("counts", first, second), (0, "3 1 1"))
    check("counts, no log", run("counts", os.path.join(d, "none.json")), (0, "0 0 0"))
    # Named tests: those that failed, timed out or never finished; passed and skipped stay.
    check("rerun", run("rerun", d, "rdma2", first, "a", "b", "c", "s", "d"), (0, "b c d"))
    check("rerun, all passed", run("rerun", d, "rdma2", second, "b", "d"), (0, ""))
    # Without names, the suite's tests come from `meson introspect --tests` (as in CI): a stand-in
    # meson on PATH lists two suites' tests.
    bindir = os.path.join(d, "bin")
    os.mkdir(bindir)
    listing = [{"name": n, "suite": [f"tickrail:{s}"]} for n, s in
               [("a", "rdma2"), ("b", "rdma2"), ("c", "ud2"), ("d", "rdma2"), ("x", "unit")]]
    with open(os.path.join(bindir, "meson"), "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\ncat <<'END'\n" + json.dumps(listing) + "\nEND\n")
    os.chmod(os.path.join(bindir, "meson"), 0o755)
    env_path = os.environ["PATH"]
    os.environ["PATH"] = bindir + os.pathsep + env_path
    check("rerun, the suite's tests from meson", run("rerun", d, "rdma2", first), (0, "b d"))
    os.environ["PATH"] = env_path
    check("passed: those of the named that passed", run("passed", second, "b", "c", "d", "e"), (0, "b d"))
    # After a re-run of b, c, e in which the guest hung in e: e counts as failed, once.
    check("counts, --expect: a re-run test that never finished", run("counts", first, second, "--expect", "b", "c", "e"),
          (0, "3 2 1"))
    check("counts, --expect: nothing unfinished", run("counts", first, second, "--expect", "b", "c"), (0, "3 1 1"))

    watchdog = "virtio_net virtio1 eth0: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 5004 ms"
    consoles = {
        "console-g1.log": "rig-guest[g1] t+3.1s: running suite rdma2\n"
                          "two_guests_ud_failover: Oops, BUG: and Kernel panic in a test's own output\n",
        "console-g2.log": "rig-guest[g2] t+12.33s: rxe0 ACTIVE on eth0 (10.77.0.2/24)\r\n"
                          f"[   87.268223] {watchdog}\r\n"
                          "[  237.093920] BUG: kernel NULL pointer dereference, address: 0000000000000774\r\n",
        "console-oops.log": "[  237.095538] Oops: 0000 [#1] PREEMPT SMP NOPTI\n",
        "console-quiet.log": "[    1.000000] random: crng init done\n",
        # tickrail's own test crashing: the kernel's line about a user process, never a re-run.
        "console-traps.log": "[   55.123456] traps: test_rc_stream[812] general protection fault"
                             " ip:55d1c0a1b2c3 sp:7ffd12 error:0 in test_rc_stream[55d1c0a00000+40000]\n"
                             'expected "[ 1.5] Oops" in the message\n',
        "console-gpf.log": "[  12.000001] general protection fault, probably for non-canonical address"
                           " 0xdead000000000122: 0000 [#1] PREEMPT SMP NOPTI\n",
        "console-panic.log": "[  13.000002] Kernel panic - not syncing: Fatal exception in interrupt\n",
        "console-wire.log": "rig-guest[g1] t+522.17s: rxe0 counters after the run: rcvd_pkts:96764\r\n"
                            "rig-guest[g1] t+523.40s: fault: the wire to the peer guest is dead: 10.77.0.2"
                            " does not resolve on eth0 (10.77.0.2 dev eth0 FAILED; tx timeouts 0)\r\n",
        "console-wire-said.log": "  | the test printed: rig-guest[g1] t+1.00s: fault: the wire to the peer guest is dead\n",
    }
    for name, text in consoles.items():
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(text)
    path = lambda name: os.path.join(d, name)  # noqa: E731
    check("fault: the first kernel line that says so, named by its console",
          run("fault", path("console-g1.log"), path("console-g2.log")), (0, f"console-g2.log: {watchdog}"))
    check("fault: an oops", run("fault", path("console-oops.log")),
          (0, "console-oops.log: Oops: 0000 [#1] PREEMPT SMP NOPTI"))
    check("fault: a test's words are not the kernel's", run("fault", path("console-g1.log")), (1, ""))
    check("fault: a kernel that only talked", run("fault", path("console-quiet.log")), (1, ""))
    check("fault: no console", run("fault", path("missing.log")), (1, ""))
    check("fault: a test process's GPF, a test's words", run("fault", path("console-traps.log")), (1, ""))
    check("fault: a kernel GPF", run("fault", path("console-gpf.log"))[0], 0)
    check("fault: a panic", run("fault", path("console-panic.log"))[0], 0)
    check("fault: guest 1's init found the wire dead", run("fault", path("console-wire.log")),
          (0, "console-wire.log: the wire to the peer guest is dead: 10.77.0.2 does not resolve on eth0"
              " (10.77.0.2 dev eth0 FAILED; tx timeouts 0)"))
    check("fault: the init's words quoted by a test", run("fault", path("console-wire-said.log")), (1, ""))

for f in failures:
    print("FAIL:", f)
print(f"rig_meson: {checks - len(failures)} of {checks} checks passed")
sys.exit(1 if failures else 0)

"""Jobs for the other guest of the two-guest rig (scripts/rig --two-guests).

Guest 2 of the rig watches TICKRAIL_RIG_PEER_DIR/jobs/*/cmd on the shared build tree, runs each
new one once with bash in the build dir (its own TICKRAIL_RDMA_* in the environment), and writes
the job's output to `out` and its exit status to `rc` (renamed into place last). A test here
submits a job, waits for a line of its output (e.g. "listening on") and for its status, every wait
bounded.
"""
import os
import re
import sys
import time

NEEDS_RIG = "no peer guest: this test needs the two-guest rig: run scripts/rig --two-guests"


class Job:
    def __init__(self, path: str, name: str):
        self.path = path
        self.name = name

    def output(self) -> str:
        try:
            with open(os.path.join(self.path, "out"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def status(self):
        try:
            with open(os.path.join(self.path, "rc"), encoding="ascii") as f:
                return int(f.read().strip() or "255")
        except FileNotFoundError:
            return None

    def wait_output(self, pattern: str, timeout: float) -> re.Match:
        """The first match of `pattern` in the job's output; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.output())
            if m:
                return m
            rc = self.status()
            if rc is not None:
                raise RuntimeError(f"peer job {self.name} exited with {rc} before printing "
                                   f"/{pattern}/:\n{self.output()}")
            if time.monotonic() > deadline:
                started = os.path.exists(os.path.join(self.path, "started"))
                raise TimeoutError(f"peer job {self.name} ({'started' if started else 'not even started'})"
                                   f" printed no /{pattern}/ within {timeout:.0f}s:\n{self.output()}")
            time.sleep(0.1)

    def wait(self, timeout: float):
        """(exit status, output); raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while (rc := self.status()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"peer job {self.name} still running after {timeout:.0f}s:\n"
                                   f"{self.output()}")
            time.sleep(0.1)
        return rc, self.output()


class Peer:
    def __init__(self, directory: str):
        self.jobs = os.path.join(directory, "jobs")

    @staticmethod
    def from_env() -> "Peer":
        d = os.environ.get("TICKRAIL_RIG_PEER_DIR", "")
        if not d or not os.path.isdir(d):
            print(f"FAIL: {NEEDS_RIG}", flush=True)
            sys.exit(1)
        return Peer(d)

    @staticmethod
    def address() -> str:
        """The peer guest's address on the rig's wire (TICKRAIL_RDMA_PEER_ADDR)."""
        addr = os.environ.get("TICKRAIL_RDMA_PEER_ADDR", "")
        if not addr:
            print(f"FAIL: {NEEDS_RIG}", flush=True)
            sys.exit(1)
        return addr

    def submit(self, name: str, command: str) -> Job:
        path = os.path.join(self.jobs, f"{time.time_ns()}-{os.getpid()}-{name}")
        os.makedirs(path)
        with open(os.path.join(path, "cmd.tmp"), "w", encoding="utf-8") as f:
            f.write(command + "\n")
        os.rename(os.path.join(path, "cmd.tmp"), os.path.join(path, "cmd"))
        return Job(path, name)

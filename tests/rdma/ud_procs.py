"""Processes for the UD rig tests: started with their output in a file, waited for a line or
their end, every wait bounded, and killed on the way out whatever happens."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

NO_DEVICE = "no RDMA device: run scripts/rig"


def fail(msg: str) -> None:
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def rig_env():
    """(device, address) of the rig; fails the test without a device."""
    try:
        present = sorted(os.listdir("/sys/class/infiniband"))
    except FileNotFoundError:
        present = []
    if not present:
        fail(NO_DEVICE + " (this host lists no RDMA device)")
    dev = os.environ.get("TICKRAIL_RDMA_DEV") or present[0]
    addr = os.environ.get("TICKRAIL_RDMA_ADDR", "")
    if not addr:
        fail("TICKRAIL_RDMA_ADDR unset: the address of the device's netdev (scripts/rig sets it)")
    return dev, addr


class Proc:
    live = []

    def __init__(self, name: str, argv):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.out = tempfile.NamedTemporaryFile(prefix=f"ud-{name}-", suffix=".log", delete=False)
        self.p = subprocess.Popen(self.argv, stdout=self.out, stderr=subprocess.STDOUT)
        self.t0 = time.monotonic()
        Proc.live.append(self)

    def output(self) -> str:
        with open(self.out.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_line(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.output())
            if m:
                return m
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.p.returncode} before "
                                   f"/{pattern}/:\n{self.output()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} printed no /{pattern}/ within {timeout:.0f}s:\n"
                                   f"{self.output()}")
            time.sleep(0.05)

    def wait(self, timeout: float) -> int:
        try:
            return self.p.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.name} still running after {timeout:.0f}s:\n{self.output()}")

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    @staticmethod
    def kill_all() -> None:
        for p in Proc.live:
            p.kill()
            try:
                os.unlink(p.out.name)
            except OSError:
                pass

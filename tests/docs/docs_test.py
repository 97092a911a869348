#!/usr/bin/env python3
"""Runs the shell commands of README.md and docs/*.md as written, so that they cannot drift.

Every line of every fenced ```sh block is a command (comments stripped). Each runs from a fresh
directory holding what the docs assume at hand: configs/, build/ (this build), examples/
trading_app, and a small valid ITCH file under every input name the docs give; the built
programs are on PATH. A command must exit 0, except:
  - commands on NOT_HERE, below: they cannot run in a test, each for the reason given;
  - commands over RDMA (configs/rc.toml, configs/ud.toml) on a host without an RDMA device:
    they must fail as documented, exit 1 with a message pointing to tickrail-doctor, not with a
    usage error (exit 2), which tells a well-formed command from a broken one.
`--cpu N` for a cpu this host lacks becomes its last cpu (the docs' hosts have more cores), and
the test says so. A line holding `CMD &` starts CMD in the background for the commands after it
in its block, as does a command on ANOTHER_TERMINAL; each must end, and exit 0, too. An entry of
NOT_HERE or ANOTHER_TERMINAL that no doc holds any more fails the test: the lists stay reviewed.

  docs_test.py BUILD_DIR MAKE_ITCH      (Meson sets TICKRAIL_SOURCE_ROOT)
"""
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Commands that cannot run in a test, and why. Reviewed: keep it short.
NOT_HERE = {
    "scripts/demo": "sets up and builds the source tree itself; its pair of programs runs below",
    "scripts/demo 10": "as scripts/demo",
    "scripts/test": "the CI itself, of which this test is a part",
    "scripts/rig": "boots QEMU guests for minutes: scripts/test's rig stage runs it",
    "scripts/rig --two-guests": "as scripts/rig",
    "meson test -C build --suite rdma": "needs an RDMA device: scripts/test's rig stage runs it",
    "sudo rdma link add rxe0 type rxe netdev eth0 && scripts/rig --native":
        "needs root and the rdma_rxe kernel module",
    "meson install -C build": "writes into the system's prefix: tests/install installs into one "
                              "of its own and builds examples/ from it",
    "make -C examples": "tests/install builds examples/ with make against the installed library",
    "tickrail-stat --prometheus /var/lib/prometheus/node-exporter/tickrail.prom --interval 5":
        "a service's loop, run until stopped, into node exporter's directory: ops_tools runs "
        "--prometheus FILE with --interval and --count",
}

# Commands the docs run in a second terminal beside the next one.
ANOTHER_TERMINAL = {
    "build/apps/jitter/tickrail-jitter --cpu 1",
}

# Input files the docs name: generated, small and valid.
ITCH_INPUTS = ["01302019.NASDAQ_ITCH50.gz", "day.itch.gz"]

TIMEOUT_S = 60
RDMA_CONFIG = re.compile(r"configs/(rc|ud)\.toml")


def blocks(path):
    """The ```sh blocks' commands, block by block (a background command serves its block)."""
    text = path.read_text().splitlines()
    result, current, in_sh = [], [], False
    for n, line in enumerate(text, 1):
        s = line.strip()
        if s.startswith("```"):
            if in_sh:
                result.append(current)
                current = []
            in_sh = not in_sh and s == "```sh"
            continue
        if in_sh:
            cmd = re.sub(r"(^|\s)#.*$", "", line).strip()
            if cmd:
                current.append((n, cmd))
    return result


# A path the docs name in backquotes: a file of this repository (or a folder of it) at the top
# level or under one of these folders. `../shared/...` is the team's, not the repository's.
REPO_PATH = re.compile(r"`((?:[A-Z][A-Z_]*\.md)|(?:(?:apps|configs|docs|examples|include|lib|scripts|tests)/[^`\s*<>]+))`")


def dangling_paths(root, docs):
    """Repository paths the docs name that do not exist, as "doc:line: path"."""
    out = []
    for doc in docs:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for m in REPO_PATH.finditer(line):
                path = m.group(1).rstrip("/.,:;")
                if not (root / path).exists():
                    out.append(f"{doc.relative_to(root)}:{n}: {path}")
    return out


def on_this_host(cmd):
    """The command with `--cpu N` moved to this host's last cpu where N is not one of its cpus."""
    cpus = os.sched_getaffinity(0)

    def cpu(m):
        return m.group(0) if int(m.group(1)) in cpus else f"--cpu {max(cpus)}"
    return re.sub(r"--cpu (\d+)", cpu, cmd)


def has_rdma_device():
    d = Path("/sys/class/infiniband")
    return d.is_dir() and any(d.iterdir())


class Run:
    def __init__(self, cwd, env):
        self.cwd, self.env = cwd, env
        self.background = []  # (where, command, Popen, log path)
        self.failures = []
        self.passed = 0

    def start(self, where, cmd):
        log = Path(self.cwd) / f"bg-{len(self.background)}.log"
        p = subprocess.Popen(["bash", "-c", cmd], cwd=self.cwd, env=self.env,
                             stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.background.append((where, cmd, p, log))

    def fail(self, where, cmd, why, output):
        self.failures.append(f"{where}: `{cmd}`: {why}\n--- output:\n{output.rstrip()}\n---")

    def check(self, where, cmd, rc, output, rdma):
        if rdma:
            if rc == 1 and "tickrail-doctor" in output:
                self.passed += 1
            else:
                self.fail(where, cmd, f"exit {rc}; expected the documented failure without an "
                          "RDMA device: exit 1 and a message pointing to tickrail-doctor", output)
        elif rc == 0:
            self.passed += 1
        else:
            self.fail(where, cmd, f"exit {rc}, expected 0", output)

    def run(self, where, cmd, rdma):
        try:
            p = subprocess.run(["bash", "-c", cmd], cwd=self.cwd, env=self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=TIMEOUT_S, start_new_session=True)
            rc, output = p.returncode, p.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc = f"none: still running after {TIMEOUT_S} s"
            output = (e.stdout or b"").decode(errors="replace")
        self.check(where, cmd, rc, output, rdma)

    def finish_background(self):
        for where, cmd, p, log in self.background:
            try:
                rc = p.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()
                rc = f"none: still running {TIMEOUT_S} s after the command it served"
            self.check(where, cmd + " &", rc, Path(log).read_text(errors="replace"),
                       bool(RDMA_CONFIG.search(cmd)))
        self.background = []


def workspace(root, build, make_itch):
    d = Path(tempfile.mkdtemp(prefix="tickrail-docs-"))
    shutil.copytree(root / "configs", d / "configs")
    (d / "build").symlink_to(build)
    (d / "examples").mkdir()
    (d / "examples" / "trading_app").symlink_to(build / "trading_app")
    raw = d / "feed.itch"
    subprocess.run([make_itch, str(raw)], check=True)
    for name in ITCH_INPUTS:
        with gzip.open(d / name, "wb") as f:
            f.write(raw.read_bytes())
    raw.unlink()
    return d


def main():
    build, make_itch = Path(sys.argv[1]).resolve(), sys.argv[2]
    root = Path(os.environ["TICKRAIL_SOURCE_ROOT"])
    docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    cwd = workspace(root, build, make_itch)
    env = dict(os.environ)
    apps = [str(p) for p in sorted((build / "apps").iterdir()) if p.is_dir()]
    env["PATH"] = os.pathsep.join(apps + [env["PATH"]])
    env["TICKRAIL_STAT_DIR"] = str(cwd / "stat")
    (cwd / "stat").mkdir()
    rdma_here = has_rdma_device()
    r = Run(str(cwd), env)
    skipped = []
    try:
        for doc in docs:
            for block in blocks(doc):
                for n, line in block:
                    where = f"{doc.relative_to(root)}:{n}"
                    if line in NOT_HERE:
                        skipped.append(f"{where}: `{line}`: {NOT_HERE[line]}")
                        continue
                    rdma = bool(RDMA_CONFIG.search(line))
                    if rdma and rdma_here:
                        skipped.append(f"{where}: `{line}`: this host has an RDMA device; the "
                                       "command needs its peer on another host")
                        continue
                    here = on_this_host(line)
                    if here != line:
                        print(f"{where}: `{line}` runs here as `{here}`")
                    # `A & B`: A in the background for B (and for the rest of the block).
                    parts = [p.strip() for p in re.split(r"(?<!&)&(?!&)", here)]
                    for bg in parts[:-1]:
                        r.start(where, bg)
                    cmd = parts[-1]
                    if not cmd:
                        continue
                    if cmd in ANOTHER_TERMINAL or line in ANOTHER_TERMINAL:
                        r.start(where, cmd)
                    else:
                        r.run(where, cmd, rdma)
                r.finish_background()
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    for d in dangling_paths(root, docs):
        r.failures.append(f"{d}: named in the docs, not in the repository")
    seen = {line for doc in docs for block in blocks(doc) for _, line in block}
    for stale in sorted((set(NOT_HERE) | ANOTHER_TERMINAL) - seen):
        r.failures.append(f"tests/docs/docs_test.py: `{stale}` is listed but in no doc any more")
    for s in skipped:
        print(f"not run here: {s}")
    for f in r.failures:
        print(f"FAILED {f}")
    print(f"docs: {r.passed} commands as documented, {len(r.failures)} failed, "
          f"{len(skipped)} not run here")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())

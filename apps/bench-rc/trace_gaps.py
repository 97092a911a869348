#!/usr/bin/env python3
"""What took the polling cpus away from the busy-polling threads, from an ftrace text trace
(rc_tail.sh TRACE=1): per cpu, each hard interrupt, softirq and other task that ran while a
polling thread (tickrail-jitter's main thread, ib_send_lat, ib_write_lat) was on that cpu or
waiting to run there, with counts and durations.

  trace_gaps.py FILE...        one summary per file
"""
import collections
import re
import signal
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s*(.*)$")
POLLERS = ("tickrail-jitter", "ib_send_lat", "ib_write_lat")
BUCKETS = (5, 20, 50, 100, 1e18)  # us


def bucket(us):
    return next(i for i, b in enumerate(BUCKETS) if us < b)


def field(text, key):
    m = re.search(key + r"=(\S+)", text)
    return m.group(1) if m else ""


def analyse(path):
    stacks = collections.defaultdict(list)  # cpu -> [(kind, start)]
    running = {}  # cpu -> (comm, pid, since)
    owed = collections.defaultdict(bool)  # cpu -> a polling thread waits to run there
    pollers = set()
    stolen = collections.defaultdict(lambda: [0, 0.0, [0] * len(BUCKETS)])  # kind -> n, us, hist
    first = last = None
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, cpu, ts, event, rest = m.groups()
        cpu, t = int(cpu), float(ts) * 1e6
        first = t if first is None else first
        last = t
        if comm.startswith(POLLERS) and int(pid) != 0:
            pollers.add(int(pid))
        cur = running.get(cpu)
        on_poller = cur is not None and cur[1] in pollers
        if event.endswith("_entry") and event != "workqueue_execute_start":
            kind = {"irq_handler_entry": "irq " + field(rest, "name"),
                    "softirq_entry": "softirq " + field(rest, r"action").rstrip("]"),
                    }.get(event, event[: -len("_entry")])
            stacks[cpu].append((kind, t))
        elif event.endswith("_exit") and stacks[cpu]:
            kind, start = stacks[cpu].pop()
            if on_poller and not stacks[cpu]:
                add(stolen[kind], t - start)
        elif event == "sched_switch":
            prev_pid, next_pid = int(field(rest, "prev_pid")), int(field(rest, "next_pid"))
            next_comm = re.search(r"next_comm=(.+?) next_pid", rest).group(1)
            # The idle task on an owed cpu means the polling thread left it (exited, moved):
            # not time taken from it.
            if cur is not None and not on_poller and owed[cpu] and not cur[0].startswith("swapper"):
                add(stolen["task " + cur[0]], t - cur[2])
            if prev_pid in pollers:  # preempted (R) rather than asleep: its cpu is owed
                owed[cpu] = field(rest, "prev_state").startswith("R")
            if next_pid in pollers:
                owed[cpu] = False
            running[cpu] = (next_comm, next_pid, t)
        # before the first switch on a cpu, the running task is the line's own
        if cpu not in running and event != "sched_switch":
            running[cpu] = (comm, int(pid), t)
    span = (last - first) if first is not None else 0.0
    print(f"{path}: {span / 1e3:.1f} ms traced, polling threads {sorted(pollers)}")
    print(f"  {'what ran on a polling thread cpu':58} {'count':>6} {'total us':>9} "
          + " ".join(f"{'<' + str(int(b)) if b < 1e17 else '>=100':>6}" for b in BUCKETS))
    for kind, (n, us, hist) in sorted(stolen.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind[:58]:58} {n:6d} {us:9.0f} " + " ".join(f"{h:6d}" for h in hist))


def add(entry, us):
    entry[0] += 1
    entry[1] += us
    entry[2][bucket(us)] += 1


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # into `head`: end quietly
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    for p in sys.argv[1:]:
        analyse(p)

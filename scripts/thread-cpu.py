#!/usr/bin/env python3
"""Per-thread CPU use of a running process over a window: which of the daemon's named threads
(pw-in<port>, pw-q<queue>, pw-tx<queue>, ...) is saturated. Reads /proc/PID/task/*/stat twice.
Usage: thread-cpu.py PID SECONDS  -> one line per thread: name, tid, % of one CPU, sorted."""
import os
import sys
import time


def sample(pid):
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread ended between listdir and open
        # Fields after the parenthesised name: utime and stime are the 12th and 13th.
        rest = stat.rsplit(")", 1)[1].split()
        out[tid] = (name, int(rest[11]) + int(rest[12]))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: thread-cpu.py PID SECONDS")
    pid, secs = int(sys.argv[1]), float(sys.argv[2])
    hz = os.sysconf("SC_CLK_TCK")
    try:
        a = sample(pid)
        t0 = time.monotonic()
        time.sleep(secs)
        b = sample(pid)
        dt = time.monotonic() - t0
    except OSError as e:
        sys.exit(f"thread-cpu: process {pid}: {e}")
    rows = []
    for tid, (name, ticks) in b.items():
        before = a.get(tid, (name, ticks))[1]
        rows.append((100.0 * (ticks - before) / hz / dt, name, tid))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print(f"threads {len(rows)}, total {total:.0f}% of one CPU over {dt:.1f} s")
    for pct, name, tid in rows:
        if pct >= 1.0:
            print(f"{name:16} {tid:>8} {pct:6.1f}%")


if __name__ == "__main__":
    main()

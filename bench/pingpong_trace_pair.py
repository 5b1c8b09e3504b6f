#!/usr/bin/env python3
"""Pairs the two trace files of a traced ping-pong (bench/pingpong_trace.c, PINGPONG_TRACE_DIR).

    bench/pingpong_trace_pair.py DIR

For each process: the delivery time of the messages it received (the other process's send()
entry to this process's recv() return: the kernel's loopback path plus this process's poll
loop noticing the message) and its turnaround (its recv() return to its next send()). Half a
round trip is delivery plus turnaround, averaged over the two sides. Both processes read the
same TSC, so their stamps compare. The first 1000 and the last 10 pairs are left out (warm-up,
teardown)."""
import glob
import statistics
import sys


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(argv) != 2 else sys.stdout)
        return 0 if len(argv) == 2 else 2
    files = sorted(glob.glob(argv[1] + "/trace.*"))
    if len(files) != 2:
        print(f"pingpong_trace_pair: want 2 trace files in {argv[1]}, found {len(files)}",
              file=sys.stderr)
        return 1
    events = []
    ns_per_tick = None
    for f in files:
        pid = f.rsplit(".", 1)[1]
        with open(f) as fh:
            for line in fh:
                kind, t = line.split()
                if kind == "K":  # the first file's factor converts both (the same TSC)
                    ns_per_tick = ns_per_tick or float(t)
                else:
                    events.append((int(t), kind, pid))
    if not ns_per_tick:
        print("pingpong_trace_pair: no K line (a trace from another version?)", file=sys.stderr)
        return 1
    events = [(t * ns_per_tick, k, p) for t, k, p in events]
    events.sort()
    delivery, turnaround = {}, {}
    last_send, last_recv = {}, {}
    for t, kind, pid in events:
        if kind == "S":
            if pid in last_recv:
                turnaround.setdefault(pid, []).append(t - last_recv.pop(pid))
            last_send[pid] = t
        else:
            other = [p for p in last_send if p != pid]
            if other:
                delivery.setdefault(pid, []).append(t - last_send.pop(other[0]))
            last_recv[pid] = t
    for pid in sorted(delivery):
        d = delivery[pid][1000:-10]
        r = turnaround.get(pid, [])[1000:-10]
        if not d or not r:
            print(f"pid {pid}: too few messages traced")
            continue
        print(f"pid {pid}: delivery to it median {statistics.median(d):.0f} ns mean "
              f"{statistics.mean(d):.0f} | its turnaround median {statistics.median(r):.0f} ns "
              f"mean {statistics.mean(r):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Ping-pong latency of hmc's Python package: an 8-byte (or --size) message sent back and forth
between two processes, as `hmc-perf --loopback --test lat --op send` measures it in C.

    PYTHONPATH=build/python HMC_PLUGIN_PATH=build/lib/hmc /usr/bin/python3 python/bench/pingpong.py

Prints the median and minimum half round trip in microseconds, and the path.
"""

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

import hmc


def pong(size, iterations, progress_thread):
    with hmc.Context(progress_thread=progress_thread) as ctx:
        print(ctx.address().hex(), flush=True)
        peer = ctx.accept(30000)
        buf = np.zeros(size, np.uint8)
        for _ in range(iterations):
            peer.recv(buf, 1).wait(30000)
            peer.send(buf, 2).wait(30000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--progress-thread", type=int, choices=(0, 1), default=1,
                    help="each context's progress thread (hmc-perf runs without: 0)")
    ap.add_argument("--pong", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    total = args.iterations + args.warmup
    if args.pong:
        return pong(args.size, total, bool(args.progress_thread))
    other = subprocess.Popen([sys.executable, __file__, "--pong", "--size", str(args.size),
                              "--iterations", str(args.iterations), "--warmup", str(args.warmup),
                              "--progress-thread", str(args.progress_thread)],
                             stdout=subprocess.PIPE, text=True)
    with hmc.Context(progress_thread=bool(args.progress_thread)) as ctx:
        peer = ctx.connect(bytes.fromhex(other.stdout.readline()), 30000)
        buf = np.zeros(args.size, np.uint8)
        times = []
        for i in range(total):
            start = time.perf_counter_ns()
            r = peer.recv(buf, 2)
            peer.send(buf, 1).wait(30000)
            r.wait(30000)
            if i >= args.warmup:
                times.append((time.perf_counter_ns() - start) / 2000)
        path = peer.info()["path"]
    other.wait(30)
    print(f"size {args.size} B, {args.iterations} round trips, progress thread "
          f"{args.progress_thread}, path {path}: half round trip "
          f"median {statistics.median(times):.2f} us, min {min(times):.2f} us")


if __name__ == "__main__":
    main()

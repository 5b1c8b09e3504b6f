#!/usr/bin/env python3
"""Draws the JSON of hmc's benchmark tools as bandwidth and latency against message size.

    bench/hmc_plot.py [-o OUT.png|.svg|.pdf] [--title T] FILE[=LABEL] ...

Each FILE holds one JSON object per line, as these print them:

    hmc-perf --format json          bandwidth bw_MBps, latency lat_us_p50 (lat_us_avg without it)
    hmc-coll-perf --json            bus bandwidth busbw_GBps, time time_us
    hmc-coll-sim --format json      the same, predicted

Every file gives one series per kind of run in it (hmc-perf: test, op and path; the
collectives: the collective and rank count), named by LABEL (default: the file's name), so that
runs of hmc and of its peers, or of two paths, or measured against predicted, lie side by side.
Unknown figures (null) are left out. --dump prints the series as read instead of drawing them.
Needs matplotlib (Debian: python3-matplotlib) for drawing only.

Exit status: 0 drawn, 1 a file could not be read (the message names the file and line),
2 bad arguments.
"""

import argparse
import json
import os
import sys
from collections import OrderedDict

VERSION = "0.1.0"


class InputError(Exception):
    pass


def kind_of(row):
    if "bw_MBps" in row and "test" in row:
        return "perf"
    if "busbw_GBps" in row and ("op" in row or "collective" in row):
        return "coll"
    return None


def series_of(path, label):
    """{series name: [(size, bandwidth GB/s or None, latency us or None)]} of one file."""
    out = OrderedDict()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(row, dict) or not isinstance(row.get("size"), int):
                raise InputError(f"{path}:{n}: not a result row (an object with an integer size)")
            kind = kind_of(row)
            if kind == "perf":
                name = f"{label} {row['test']} {row['op']}"
                if row.get("path"):
                    name += f" {row['path']}"
                bw = row["bw_MBps"] / 1000 if row["bw_MBps"] is not None else None
                lat = row.get("lat_us_p50")
                if lat is None:
                    lat = row.get("lat_us_avg")
            elif kind == "coll":
                name = f"{label} {row.get('op') or row.get('collective')} x{row.get('ranks', '?')}"
                bw, lat = row["busbw_GBps"], row.get("time_us")
            else:
                raise InputError(f"{path}:{n}: neither hmc-perf's nor a collective tool's row")
            out.setdefault(name, []).append((row["size"], bw, lat))
    if not out:
        raise InputError(f"{path}: no rows")
    return out


def size_text(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


def draw(all_series, out, title):
    try:
        import matplotlib
    except ImportError:
        raise InputError(f"drawing needs matplotlib, which {sys.executable} lacks (Debian: "
                         "python3-matplotlib, for /usr/bin/python3)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_bw, ax_lat) = plt.subplots(1, 2, figsize=(12, 4.8))
    sizes = sorted({s for pts in all_series.values() for s, _, _ in pts})
    for name, pts in all_series.items():
        pts = sorted(pts)
        bw = [(s, v) for s, v, _ in pts if v is not None]
        lat = [(s, v) for s, _, v in pts if v is not None]
        if bw:
            ax_bw.plot([s for s, _ in bw], [v for _, v in bw], marker="o", label=name)
        if lat:
            ax_lat.plot([s for s, _ in lat], [v for _, v in lat], marker="o", label=name)
    for ax, what in ((ax_bw, "bandwidth (GB/s; collectives: bus bandwidth)"),
                     (ax_lat, "latency (us; collectives: time per operation)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_text(s) for s in sizes], rotation=45, fontsize=8)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    ax_lat.set_yscale("log")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out)


def main(argv):
    p = argparse.ArgumentParser(prog="hmc_plot.py", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", metavar="FILE[=LABEL]")
    p.add_argument("-o", "--output", default="hmc-plot.png",
                   help="the image; its extension chooses the format (png, svg, pdf)")
    p.add_argument("--title", default="")
    p.add_argument("--dump", action="store_true", help="print the series instead of drawing")
    p.add_argument("--version", action="version", version=f"hmc_plot.py (hmc) {VERSION}")
    a = p.parse_args(argv)
    all_series = OrderedDict()
    try:
        for spec in a.files:
            path, _, label = spec.partition("=")
            for name, pts in series_of(path, label or os.path.basename(path)).items():
                all_series.setdefault(name, []).extend(pts)
    except (OSError, InputError) as e:
        print(f"hmc_plot.py: {e}", file=sys.stderr)
        return 1
    if a.dump:
        for name, pts in all_series.items():
            for s, bw, lat in sorted(pts):
                print(f"{name}\t{s}\t{'null' if bw is None else bw}\t{'null' if lat is None else lat}")
        return 0
    try:
        draw(all_series, a.output, a.title)
    except InputError as e:
        print(f"hmc_plot.py: {e}", file=sys.stderr)
        return 1
    print(f"hmc_plot.py: {a.output}: {len(all_series)} series")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # --dump into head
        sys.exit(0)

#!/usr/bin/env bash
# System calls and CPU time per iteration of one collective, all local ranks together.
#
#   bench/coll_syscalls.sh [--np N] [--op OP] [--size SIZE] [--iters N1,N2]
#
# Runs hmc-coll-perf --np N -o OP at SIZE twice, N1 and N2 timed iterations (default 10,5000),
# under `perf stat` (tracepoints raw_syscalls:sys_enter and a few syscalls:sys_enter_*, and
# task-clock), and prints the difference divided by N2 - N1: what one iteration costs, without
# the start-up. Counts are what to compare: on a loaded host the times scatter, the counts do
# not. Tools come from $BUILD_DIR/bin (default ./build/bin under the repository root). Needs
# perf with tracepoint access (perf_event_paranoid <= 2 as root, or -1).
set -u
NP=2
OP=all_reduce
SIZE=64K
ITERS=10,5000
while [ $# -gt 0 ]; do
  case "$1" in
    --np) NP="${2:-}"; shift ;;
    --op) OP="${2:-}"; shift ;;
    --size) SIZE="${2:-}"; shift ;;
    --iters) ITERS="${2:-}"; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "coll_syscalls.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
N1=${ITERS%,*}
N2=${ITERS#*,}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
[ -x "$BIN/hmc-coll-perf" ] || { echo "coll_syscalls.sh: $BIN/hmc-coll-perf is not built" >&2; exit 2; }
command -v perf >/dev/null || { echo "coll_syscalls.sh: needs perf" >&2; exit 2; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
CALLS="recvfrom read futex sched_yield epoll_wait poll process_vm_readv"
EV=raw_syscalls:sys_enter,task-clock
for c in $CALLS; do EV="$EV,syscalls:sys_enter_$c"; done
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); hmc-coll-perf --np $NP -o $OP -b $SIZE"
for n in "$N1" "$N2"; do
  perf stat -x, -o "$OUT/$n.csv" -e "$EV" "$BIN/hmc-coll-perf" --np "$NP" -o "$OP" -b "$SIZE" \
    -e "$SIZE" -n "$n" -w 5 >"$OUT/$n.out" 2>&1 ||
    { echo "coll_syscalls.sh: the run of $n iterations failed:" >&2; cat "$OUT/$n.out" >&2; exit 1; }
  echo "# $n iterations: $(grep -v '^#' "$OUT/$n.out" | tail -1 | awk '{print $6 " us each"}')"
done
python3 - "$OUT" "$N1" "$N2" <<'PY'
import sys
out, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(n):
    d = {}
    for line in open(f"{out}/{n}.csv"):
        f = line.strip().split(",")
        if len(f) > 3 and f[0][:1].isdigit():
            d[f[2]] = float(f[0])
    return d
a, b = load(n1), load(n2)
for k in a:
    name = k.replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "all system calls")
    unit = "ms of CPU" if k == "task-clock" else ""
    print(f"{name:24s} {(b.get(k, 0) - a[k]) / (n2 - n1):10.2f} per iteration {unit}")
PY

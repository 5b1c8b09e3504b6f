#!/usr/bin/env bash
# hmc's collectives against Open MPI's on this host, side by side in one run (issue 18's goals).
#
#   bench/coll_compare.sh [--quick] [--reps N] [--np N] [--ops LIST] [--sizes LIST] [--json]
#
# For each repetition and each operation, hmc-coll-perf --np N and then, right after it,
# mpi-coll-bench under mpirun (shared memory: btl self,vader; Open MPI's tuned collectives) time
# the same operation at the same sizes, host memory, float sum; then the 8-byte all-reduce the
# same way; then hoststage's shared memory, a 4 MiB send/recv stream (hmc-perf --loopback --path
# hoststage/shm), against one core's memcpy of 4 MiB (memcpy-bench), the single-copy limit. Each
# case's row gives the median over the repetitions of each side and the median of the
# repetitions' ratios (each ratio from two runs seconds apart: this machine's speed drifts by
# 2-4x over minutes, so figures taken far apart do not compare), and every repetition's ratio.
#
#   --quick        2 repetitions, fewer iterations (a smoke run, not figures)
#   --reps N       repetitions (default 5)
#   --np N         ranks (default 4)
#   --ops LIST     comma-separated: all_reduce,all_gather,all_to_all (default), reduce_scatter,
#                  broadcast
#   --sizes LIST   comma-separated sizes per rank in nccl-tests' convention (default 64K,1M,16M)
#   --json         one JSON object per case instead of the table
#
# Goals: busbw ratio hmc / MPI >= 1.00 for every op and size; 8-byte all-reduce time ratio
# <= 1.25; shared memory's 4 MiB send/recv >= 0.90 of memcpy. Tools come from $BUILD_DIR/bin (default ./build/bin under the repository
# root); mpirun from $PATH ($MPIRUN overrides). Exit status: 0 every goal met, 1 a goal missed or
# a run failed, 2 bad arguments or a tool missing.
set -u

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

REPS=5
NP=4
OPS=all_reduce,all_gather,all_to_all
SIZES=64K,1M,16M
QUICK=0
JSON=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --quick) QUICK=1; REPS=2 ;;
    --reps) REPS="${2:-}"; shift ;;
    --np) NP="${2:-}"; shift ;;
    --ops) OPS="${2:-}"; shift ;;
    --sizes) SIZES="${2:-}"; shift ;;
    --json) JSON=1 ;;
    *) echo "coll_compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case "$REPS$NP" in *[!0-9]*|'') echo "coll_compare.sh: --reps and --np take numbers" >&2; exit 2 ;; esac

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
MPIRUN="${MPIRUN:-mpirun}"
for tool in "$BIN/hmc-coll-perf" "$BIN/mpi-coll-bench" "$BIN/hmc-perf" "$BIN/memcpy-bench"; do
  [ -x "$tool" ] || { echo "coll_compare.sh: $tool is not built (MPI found at configure time?)" >&2; exit 2; }
done
command -v "$MPIRUN" >/dev/null || { echo "coll_compare.sh: no $MPIRUN on PATH" >&2; exit 2; }
command -v python3 >/dev/null || { echo "coll_compare.sh: needs python3" >&2; exit 2; }

# Open MPI refuses root without the flag, and more ranks than cores without --oversubscribe.
MPI_ARGS=(--oversubscribe --mca btl self,vader -np "$NP")
[ "$(id -u)" = 0 ] && MPI_ARGS=(--allow-run-as-root "${MPI_ARGS[@]}")

# Iterations: enough for a few hundred milliseconds per size at this machine's speeds.
iters_for() {  # size -> "-n N -w W"
  local n
  case "$1" in
    8) n=2000 ;;
    *K|*k) n=200 ;;
    1M|1m|2M|2m|4M|4m) n=40 ;;
    *) n=10 ;;
  esac
  [ "$QUICK" = 1 ] && n=$(( n / 10 > 2 ? n / 10 : 2 ))
  echo "-n $n -w $(( n / 5 > 2 ? n / 5 : 2 ))"
}

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
FAILED=0
run_pair() {  # rep op size
  local rep=$1 op=$2 size=$3 it
  it=$(iters_for "$size")
  # hmc-coll-perf --np picks a free port for its rendezvous, which another process may take
  # before rank 0 binds it: one more try then.
  # shellcheck disable=SC2086
  if ! timeout 300 "$BIN/hmc-coll-perf" --np "$NP" -o "$op" -b "$size" -e "$size" -f 1 $it --json \
       >"$OUT/hmc.$rep.$op.$size" 2>"$OUT/hmc.err" &&
     ! timeout 300 "$BIN/hmc-coll-perf" --np "$NP" -o "$op" -b "$size" -e "$size" -f 1 $it --json \
       >"$OUT/hmc.$rep.$op.$size" 2>"$OUT/hmc.err"; then
    echo "coll_compare.sh: hmc-coll-perf -o $op -b $size failed:" >&2; cat "$OUT/hmc.err" >&2
    FAILED=1
  fi
  # shellcheck disable=SC2086
  if ! timeout 300 "$MPIRUN" "${MPI_ARGS[@]}" "$BIN/mpi-coll-bench" -o "$op" -b "$size" -e "$size" \
       -f 1 $it --json >"$OUT/mpi.$rep.$op.$size" 2>"$OUT/mpi.err"; then
    echo "coll_compare.sh: mpi-coll-bench -o $op -b $size failed:" >&2; cat "$OUT/mpi.err" >&2
    FAILED=1
  fi
}

run_copy() {  # rep: hoststage/shm 4 MiB send/recv, then one core's memcpy of 4 MiB
  if ! timeout 300 "$BIN/hmc-perf" --loopback --net hoststage --path hoststage/shm --size 4M \
       --format json --quiet >"$OUT/shm.$1" 2>"$OUT/shm.err"; then
    echo "coll_compare.sh: hmc-perf over hoststage/shm failed:" >&2; cat "$OUT/shm.err" >&2
    FAILED=1
  fi
  "$BIN/memcpy-bench" --size 4M --json >"$OUT/memcpy.$1" || FAILED=1
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
IFS=, read -r -a op_list <<<"$OPS"
IFS=, read -r -a size_list <<<"$SIZES"
for ((rep = 0; rep < REPS; ++rep)); do
  for op in "${op_list[@]}"; do
    for size in "${size_list[@]}"; do run_pair "$rep" "$op" "$size"; done
  done
  run_pair "$rep" all_reduce 8
  HMC_HOSTSTAGE_SHM=1 run_copy "$rep"
done

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$REPS" "$JSON" "$NP" "$OPS" "$SIZES" "$LOAD_START" "$LOAD_END" <<'EOF'
import json, os, statistics, sys
out, reps, as_json, np = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
ops, sizes = sys.argv[5].split(","), sys.argv[6].split(",")
load_start, load_end = sys.argv[7], sys.argv[8]

def read(path):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    return json.loads(line)
    except OSError:
        pass
    return None

cases = [(op, s, "bw") for op in ops for s in sizes] + [("all_reduce", "8", "lat"),
                                                          ("shm_send", "4M", "copy")]
failed = False
rows = []
for op, size, kind in cases:
    h, m, ratios = [], [], []
    for rep in range(reps):
        if kind == "copy":
            a, b = read(f"{out}/shm.{rep}"), read(f"{out}/memcpy.{rep}")
        else:
            a, b = read(f"{out}/hmc.{rep}.{op}.{size}"), read(f"{out}/mpi.{rep}.{op}.{size}")
        if not a or not b:
            continue
        if kind == "copy":
            h.append(a["bw_MBps"] / 1e3); m.append(b["GBps"])
            ratios.append(h[-1] / m[-1] if m[-1] else 0)
        elif kind == "bw":
            h.append(a["busbw_GBps"]); m.append(b["busbw_GBps"])
            ratios.append(a["busbw_GBps"] / b["busbw_GBps"] if b["busbw_GBps"] else 0)
        else:
            h.append(a["time_us"]); m.append(b["time_us"])
            ratios.append(a["time_us"] / b["time_us"] if b["time_us"] else float("inf"))
    if not ratios:
        failed = True
        rows.append(dict(op=op, size=size, metric=kind, measured=False))
        continue
    r = statistics.median(ratios)
    ok = r >= 1.0 if kind == "bw" else r >= 0.9 if kind == "copy" else r <= 1.25
    failed |= not ok
    rows.append(dict(op=op, size=size,
                     metric={"bw": "busbw_GBps", "lat": "time_us", "copy": "GBps"}[kind],
                     hmc=statistics.median(h), mpi=statistics.median(m), ratio=r,
                     goal={"bw": ">=1.00", "lat": "<=1.25", "copy": ">=0.90"}[kind], ok=ok,
                     reps=len(ratios), ratios=[round(x, 3) for x in ratios],
                     against="memcpy" if kind == "copy" else "mpi"))
if as_json:
    for row in rows:
        print(json.dumps(row))
else:
    print(f"# {np} ranks, host memory, float sum; medians of {reps} repetitions, each hmc then MPI"
          " (shm_send: hmc-perf over hoststage/shm, then memcpy-bench, in the MPI column)")
    print(f"# load average (1, 5, 15 min): {load_start} at the start, {load_end} at the end")
    print(f"# {'op':<12} {'size':>6} {'metric':<11} {'hmc':>10} {'MPI':>10} {'ratio':>7} {'goal':>7}  result  (each repetition's ratio)")
    for row in rows:
        if not row.get("measured", True):
            print(f"  {row['op']:<12} {row['size']:>6} {row['metric']:<11} {'-':>10} {'-':>10} {'-':>7} {'':>7}  not measured")
            continue
        print(f"  {row['op']:<12} {row['size']:>6} {row['metric']:<11} {row['hmc']:>10.3f} {row['mpi']:>10.3f} "
              f"{row['ratio']:>7.2f} {row['goal']:>7}  {'pass' if row['ok'] else 'FAIL'}    {row['ratios']}")
sys.exit(1 if failed else 0)
EOF
rc=$?
[ "$FAILED" = 1 ] && rc=1
exit $rc

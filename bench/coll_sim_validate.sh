#!/usr/bin/env bash
# The collectives' simulator against measured runs on this host: calibrates a cluster
# description from a few measurements, then measures each case with hmc-coll-perf and predicts
# it with hmc-coll-sim, and prints both and the error.
#
#   bench/coll_sim_validate.sh [--np LIST] [--ops LIST] [--sizes LIST] [--reps N] [--quick]
#                              [--best] [--topology FILE] [--write-topology FILE] [--json]
#
# Calibration (skipped with --topology FILE, which gives the cluster instead):
#   - the shared-memory link: hmc-perf --loopback over hoststage/shm, bandwidth at 1 MiB
#     (paths.shared_memory.gbps) and the 8-byte latency (latency_us), medians of --reps runs;
#   - the host: its cores (nproc, hosts[].cores); a core's share of the copying (cpu_gbps) is
#     the link's bandwidth over the two cores a transfer keeps busy (one copying in, one out);
#     memcpy and float-sum rates of one core on 64 MiB arrays (python3 with numpy; the built-in
#     figures without it) for the host's copy_gbps and reduce_gbps;
#   - the executor's cost per step (executor.step_us): the 8-byte all-reduce of 2 ranks
#     (hmc-coll-perf, median of --reps) less the simulator's prediction without it, over the
#     prediction's sensitivity to it (each step's cost, counted by the simulator itself).
# Each case then alternates: hmc-coll-perf --np N (median of --reps runs), hmc-coll-sim on the
# calibrated cluster of N ranks on this host. error = predicted / measured - 1.
#
#   --np LIST        ranks, comma-separated (default 2,4,8)
#   --ops LIST       all_reduce,all_gather,all_to_all (default)
#   --sizes LIST     nccl-tests' sizes (default 64K,1M,16M)
#   --reps N         measured runs per case (default 3; medians)
#   --best           the best of the runs instead of their median, for the calibration and the
#                    cases alike: what the host can do between bursts of other load, where the
#                    median is what it did under that load
#   --quick          --reps 1, fewer iterations (a smoke run, not figures)
#   --topology FILE  a cluster description to check instead of calibrating; its hosts[0]
#                    (ranks, cores, cpu_gbps, memory_gbps) is repeated for N ranks
#   --write-topology FILE  keep the calibrated description (of 4 ranks) there
#   --json           one JSON object per case instead of the table
#
# Tools come from $BUILD_DIR/bin (default ./build/bin). Exit status: 0 every case within 25%,
# 1 a case off by more or not measured, 2 bad arguments or a tool missing. The machine's load
# moves every measured figure: read the errors with the load of the moment (uptime is printed).
set -u

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

NPS=2,4,8
OPS=all_reduce,all_gather,all_to_all
SIZES=64K,1M,16M
REPS=3
QUICK=0
TOPO=""
WRITE=""
JSON=0
STAT=median
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --np) NPS="${2:-}"; shift ;;
    --ops) OPS="${2:-}"; shift ;;
    --sizes) SIZES="${2:-}"; shift ;;
    --reps) REPS="${2:-}"; shift ;;
    --quick) QUICK=1; REPS=1 ;;
    --best) STAT=best ;;
    --topology) TOPO="${2:-}"; shift ;;
    --write-topology) WRITE="${2:-}"; shift ;;
    --json) JSON=1 ;;
    *) echo "coll_sim_validate.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case "$REPS" in *[!0-9]*|''|0) echo "coll_sim_validate.sh: --reps takes a number >= 1" >&2; exit 2 ;; esac
[ -n "$TOPO" ] && [ ! -r "$TOPO" ] && { echo "coll_sim_validate.sh: cannot read $TOPO" >&2; exit 2; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
for tool in hmc-coll-perf hmc-coll-sim hmc-perf; do
  [ -x "$BIN/$tool" ] || { echo "coll_sim_validate.sh: $BIN/$tool is not built" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "coll_sim_validate.sh: needs python3" >&2; exit 2; }

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
export COLL_SIM_STAT=$STAT
# The python helpers: medians of JSON lines, the topology writer, the report.
cat >"$OUT/lib.py" <<'EOF'
import json, statistics, sys

def field(path, key):
    vals = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            vals.append(json.loads(line)[key])
    return vals

def median_of(paths, key):
    """The median of the runs' figures, or with COLL_SIM_STAT=best the best (the smallest time
    or latency, the largest bandwidth)."""
    import os
    vals = [v for p in paths for v in field(p, key)]
    if not vals:
        return None
    if os.environ.get("COLL_SIM_STAT") == "best":
        return max(vals) if key.startswith("bw") else min(vals)
    return statistics.median(vals)

def topology(template, ranks):
    """The calibrated (or given) cluster with its first host holding `ranks` host ranks."""
    t = json.load(open(template))
    h = t["hosts"][0]
    h["ranks"] = ["host"] * ranks
    h.pop("repeat", None)
    t["hosts"] = [h]
    return t
EOF

iters_for() {  # size -> hmc-coll-perf's -n and -w
  local n
  case "$1" in
    8) n=1000 ;;
    *K|*k) n=100 ;;
    1M|1m|2M|2m|4M|4m) n=20 ;;
    *) n=5 ;;
  esac
  [ "$QUICK" = 1 ] && n=$(( n / 10 > 2 ? n / 10 : 2 ))
  echo "-n $n -w $(( n / 5 > 1 ? n / 5 : 1 ))"
}

measure() {  # np op size rep -> file with one JSON line
  local it
  it=$(iters_for "$3")
  # One more try when it fails: hmc-coll-perf --np's rendezvous port may be taken by another
  # process between its choice and rank 0's bind.
  # shellcheck disable=SC2086
  timeout 300 "$BIN/hmc-coll-perf" --np "$1" -o "$2" -b "$3" -e "$3" -f 1 $it --json \
    >"$OUT/m.$1.$2.$3.$4" 2>"$OUT/m.err" ||
  timeout 300 "$BIN/hmc-coll-perf" --np "$1" -o "$2" -b "$3" -e "$3" -f 1 $it --json \
    >"$OUT/m.$1.$2.$3.$4" 2>"$OUT/m.err" ||
    { echo "coll_sim_validate.sh: hmc-coll-perf --np $1 -o $2 -b $3 failed:" >&2; cat "$OUT/m.err" >&2; }
}

predict() {  # topology-file op size -> time_us
  "$BIN/hmc-coll-sim" --topology "$1" -o "$2" -b "$3" -e "$3" -f 2 --format json 2>"$OUT/s.err" |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["time_us"])' ||
    { echo "coll_sim_validate.sh: hmc-coll-sim -o $2 -b $3 failed:" >&2; cat "$OUT/s.err" >&2; echo nan; }
}

with_ranks() {  # template ranks -> file
  python3 -c "import json,sys; sys.path.insert(0, '$OUT'); import lib; json.dump(lib.topology('$1', $2), open('$OUT/topo.$2.json', 'w'), indent=1)"
  echo "$OUT/topo.$2.json"
}

if [ -z "$TOPO" ]; then
  echo "# calibrating (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  bw=() lat=()
  for ((rep = 0; rep < REPS; ++rep)); do
    "$BIN/hmc-perf" --loopback --net hoststage --path hoststage/shm --test bw --op send --size 1M \
      --iters $([ "$QUICK" = 1 ] && echo 100 || echo 1000) --format json --quiet >"$OUT/bw.$rep" 2>/dev/null
    "$BIN/hmc-perf" --loopback --net hoststage --path hoststage/shm --test lat --op send --size 8 \
      --iters $([ "$QUICK" = 1 ] && echo 1000 || echo 10000) --format json --quiet >"$OUT/lat.$rep" 2>/dev/null
  done
  cores=$(nproc)
  # One core's memcpy and float-sum rates (Gb/s) on 64 MiB, by whichever python3 has numpy.
  rates="160 160"
  for py in python3 /usr/bin/python3; do
    "$py" -c 'import numpy' 2>/dev/null || continue
    rates=$("$py" -c '
import time, numpy as np
a = np.ones(1 << 24, dtype=np.float32); b = np.ones(1 << 24, dtype=np.float32)
def rate(fn):
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t)
    return a.nbytes * 8 / best / 1e9
print(rate(lambda: np.copyto(a, b)), rate(lambda: np.add(a, b, out=a)))')
    break
  done
  python3 - "$OUT" "$REPS" "$cores" $rates >"$OUT/base.json" <<'EOF' || exit 1
import json, sys
sys.path.insert(0, sys.argv[1])
import lib
out, reps, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
copy_gbps, reduce_gbps = float(sys.argv[4]), float(sys.argv[5])
bw = lib.median_of([f"{out}/bw.{r}" for r in range(reps)], "bw_MBps")
lat = lib.median_of([f"{out}/lat.{r}" for r in range(reps)], "lat_us_p50")
if bw is None or lat is None:
    sys.exit("coll_sim_validate.sh: hmc-perf gave no figures")
link_gbps = bw * 8 / 1000  # MB/s -> Gb/s
print(json.dumps({
    "name": "this host, calibrated by bench/coll_sim_validate.sh",
    "paths": {"shared_memory": {"gbps": round(link_gbps, 2), "latency_us": round(lat, 3)}},
    "vendors": {"host": {"copy_gbps": round(copy_gbps, 1), "reduce_gbps": round(reduce_gbps, 1)}},
    "executor": {"step_us": 0, "transfer_us": 0},
    "hosts": [{"name": "this", "ranks": ["host", "host"], "cores": cores,
               "cpu_gbps": round(link_gbps / 2, 2)}]}, indent=1))
EOF
  # The executor's step cost from the 8-byte all-reduce of 2 ranks (a core each).
  for ((rep = 0; rep < REPS; ++rep)); do measure 2 all_reduce 8 "$rep"; done
  t2=$(with_ranks "$OUT/base.json" 2)
  p0=$(predict "$t2" all_reduce 8)
  python3 -c "import json; t=json.load(open('$t2')); t['executor']['step_us']=1; json.dump(t, open('$OUT/unit.json','w'))"
  p1=$(predict "$OUT/unit.json" all_reduce 8)
  python3 - "$OUT" "$REPS" "$p0" "$p1" >"$OUT/calibrated.json" <<'EOF' || exit 1
import json, sys
sys.path.insert(0, sys.argv[1])
import lib
out, reps, p0, p1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
m = lib.median_of([f"{out}/m.2.all_reduce.8.{r}" for r in range(reps)], "time_us")
if m is None:
    sys.exit("coll_sim_validate.sh: the 8-byte all-reduce gave no figure")
t = json.load(open(f"{out}/base.json"))
t["executor"]["step_us"] = round(max(0.0, (m - p0) / (p1 - p0)) if p1 > p0 else 0.0, 3)
print(json.dumps(t, indent=1))
EOF
  TOPO="$OUT/calibrated.json"
  [ -n "$WRITE" ] && python3 -c "import json,sys; sys.path.insert(0, '$OUT'); import lib; json.dump(lib.topology('$TOPO', 4), open('$WRITE', 'w'), indent=1)"
  echo "# calibrated: $(python3 -c "import json; t=json.load(open('$TOPO')); print(json.dumps({k: t[k] for k in ('paths', 'vendors', 'executor')}), json.dumps({k: t['hosts'][0][k] for k in ('cores', 'cpu_gbps')}))")" >&2
fi

IFS=, read -r -a np_list <<<"$NPS"
IFS=, read -r -a op_list <<<"$OPS"
IFS=, read -r -a size_list <<<"$SIZES"
: >"$OUT/cases"
for np in "${np_list[@]}"; do
  topo=$(with_ranks "$TOPO" "$np")
  for op in "${op_list[@]}"; do
    for size in "${size_list[@]}"; do
      for ((rep = 0; rep < REPS; ++rep)); do measure "$np" "$op" "$size" "$rep"; done
      echo "$np $op $size $(predict "$topo" "$op" "$size")" >>"$OUT/cases"
    done
  done
done

python3 - "$OUT" "$REPS" "$JSON" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, math, os, sys
sys.path.insert(0, sys.argv[1])
import lib
out, reps, as_json, load = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
bad = False
rows = []
for line in open(f"{out}/cases"):
    np_, op, size, pred = line.split()
    pred = float(pred)
    m = lib.median_of([f"{out}/m.{np_}.{op}.{size}.{r}" for r in range(reps)], "time_us")
    err = (pred / m - 1) if m and not math.isnan(pred) else None
    ok = err is not None and abs(err) <= 0.25
    bad |= not ok
    rows.append(dict(ranks=int(np_), op=op, size=size, measured_us=m, predicted_us=pred,
                     error=None if err is None else round(err, 3), within_25=ok))
if as_json:
    for r in rows:
        print(json.dumps(r))
else:
    stat = "best" if os.environ.get("COLL_SIM_STAT") == "best" else "median"
    print(f"# hmc-coll-perf ({stat} of {reps}) against hmc-coll-sim; load at the end: {load}")
    print(f"# {'ranks':>5} {'op':<12} {'size':>6} {'measured us':>12} {'predicted us':>13} {'error':>8}")
    for r in rows:
        m = "-" if r["measured_us"] is None else f"{r['measured_us']:.1f}"
        e = "-" if r["error"] is None else f"{r['error'] * 100:+.0f}%"
        print(f"  {r['ranks']:>5} {r['op']:<12} {r['size']:>6} {m:>12} {r['predicted_us']:>13.1f} {e:>8}"
              f"{'' if r['within_25'] else '  (off by more than 25%)'}")
sys.exit(1 if bad else 0)
EOF

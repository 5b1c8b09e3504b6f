#!/usr/bin/env bash
# The simulator's model of a vendor collective library against measured runs on this host, which
# has no GPU: the emulated NCCL of tests/fakes/nccl (over the emulated CUDA runtime) run through
# hmc's nccl ccl plugin by hmc-coll-perf (HMC_COLL_BACKEND=ccl), against hmc-coll-sim --backend
# ccl --ccl-algo direct (the emulated library's algorithm as a schedule of library steps).
#
#   bench/coll_sim_ccl_validate.sh [--np LIST] [--sizes LIST] [--reps N] [--quick]
#
# Calibration, from 2 ranks: the library call's fixed cost (ccl.call_us) is the 8-byte
# all-reduce's time; the emulated library's reduction rate (reduce_gbps) is what the 1 MiB
# all-reduce takes beyond that, less its three copies at the host's memcpy rate (numpy, 64 MiB;
# 80 Gb/s without numpy). Then each case is measured (median of --reps runs) and predicted.
#
#   --np LIST     ranks, comma-separated (default 2,4)
#   --sizes LIST  all-reduce sizes (default 8,64K,256K,1M,4M)
#   --reps N      measured runs per case (default 3; medians)
#   --quick       --reps 1, fewer iterations (a smoke run, not figures)
#
# Tools from $BUILD_DIR (default ./build): bin/hmc-coll-perf, bin/hmc-coll-sim, lib/hmc, and the
# fakes under tests/fakes. Exit status: 0 every case within 25%, 1 a case off by more or not
# measured, 2 bad arguments or a tool missing. uptime is printed: read the errors with the load.
set -u
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
NPS=2,4
SIZES=8,64K,256K,1M,4M
REPS=3
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --np) NPS="${2:-}"; shift ;;
    --sizes) SIZES="${2:-}"; shift ;;
    --reps) REPS="${2:-}"; shift ;;
    --quick) QUICK=1; REPS=1 ;;
    *) echo "coll_sim_ccl_validate.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$REPS" in *[!0-9]*|''|0) echo "coll_sim_ccl_validate.sh: --reps takes a number >= 1" >&2; exit 2 ;; esac
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
FAKES="$BUILD/tests/fakes"
for f in bin/hmc-coll-perf bin/hmc-coll-sim lib/hmc/libhmc-ccl-nccl.so tests/fakes/nccl/libnccl.so.2 \
         tests/fakes/cuda/libcuda.so.1; do
  [ -e "$BUILD/$f" ] || { echo "coll_sim_ccl_validate.sh: $BUILD/$f is not built" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "coll_sim_ccl_validate.sh: needs python3" >&2; exit 2; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

export HMC_PLUGIN_PATH="$BUILD/lib/hmc" HMC_NET_PLUGINS=hoststage HMC_HOSTSTAGE_SHM=1 \
  HMC_DEVICE_COPY_CALIBRATE=0 HMC_NET_CALIBRATE=0 HMC_DEVICE_PLUGINS=cuda \
  HMC_CUDA_LIBRARY="$FAKES/cuda/libcuda.so.1" HMC_CCL_PLUGINS=nccl \
  HMC_NCCL_LIBRARY="$FAKES/nccl/libnccl.so.2" HMC_NCCL_CUDA_LIBRARY="$FAKES/cuda/libcuda.so.1" \
  HMC_COLL_BACKEND=ccl FAKENCCL_TIMEOUT_MS=60000

iters_for() {
  local n
  case "$1" in 8) n=200 ;; *K|*k) n=40 ;; 1M|1m) n=10 ;; *) n=4 ;; esac
  [ "$QUICK" = 1 ] && n=$(( n / 4 > 2 ? n / 4 : 2 ))
  echo "-n $n -w 1"
}
mems() { local i out=""; for ((i = 0; i < $1; i++)); do out="$out${out:+,}cuda:$((i % 2))"; done; echo "$out"; }
measure() {  # np size -> median time_us of REPS runs
  local r it
  it=$(iters_for "$2")
  for ((r = 0; r < REPS; r++)); do
    # shellcheck disable=SC2086
    timeout 600 "$BUILD/bin/hmc-coll-perf" --np "$1" --mem-by-rank "$(mems "$1")" -o all_reduce \
      -b "$2" -e "$2" -f 2 $it --json 2>"$OUT/err" | grep '^{' >>"$OUT/m.$1.$2" ||
      { echo "coll_sim_ccl_validate.sh: hmc-coll-perf --np $1 -b $2 failed:" >&2; cat "$OUT/err" >&2; }
  done
  python3 -c 'import json,statistics,sys
v=[json.loads(l)["time_us"] for l in open(sys.argv[1]) if l.strip()]
print(statistics.median(v) if v else "")' "$OUT/m.$1.$2" 2>/dev/null
}
topology() {  # np call_us copy_gbps reduce_gbps cores -> file
  python3 - "$@" >"$OUT/topo.$1.json" <<'PY'
import json, sys
n, call, copy, red = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cores = int(sys.argv[5])
print(json.dumps({
  "name": "this host, the emulated NCCL over emulated CUDA memory",
  "vendors": {"cuda": {"copy_gbps": copy, "reduce_gbps": red, "op_latency_us": 0,
                       "ccl": {"library": "fakenccl", "fabric_gbps": 0, "pair_gbps": 0,
                               "latency_us": 0, "call_us": call, "step_us": 0, "channels": 1}}},
  "hosts": [{"ranks": ["cuda"] * n, "cores": cores}]}))
PY
  echo "$OUT/topo.$1.json"
}
predict() {  # topology size -> time_us
  "$BUILD/bin/hmc-coll-sim" --topology "$1" -o all_reduce -b "$2" -e "$2" --backend ccl \
    --ccl-algo direct --format json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["time_us"])'
}

echo "# $(uptime)"
COPY=$(python3 -c '
import time
try:
    import numpy as np
except ImportError:
    print(80); raise SystemExit
a = np.ones(16 << 20, dtype=np.float32); b = np.empty_like(a); best = 1e9
for _ in range(5):
    t = time.perf_counter(); np.copyto(b, a); best = min(best, time.perf_counter() - t)
print(round(a.nbytes * 8 / best / 1e9, 2))')
T8=$(measure 2 8)
T1M=$(measure 2 1M)
[ -n "$T8" ] && [ -n "$T1M" ] || { echo "coll_sim_ccl_validate.sh: calibration runs failed" >&2; exit 1; }
RED=$(python3 -c "
s = 1 << 20; t = ($T1M - $T8) * 1e3 - 3 * s * 8 / $COPY  # ns for the reduction
print(round(s * 8 / max(t, 1.0), 4))")
echo "# calibrated: call ${T8} us, copy ${COPY} Gb/s, emulated reduction ${RED} Gb/s (2 ranks, 8 B and 1 MiB)"
echo "| ranks | size | measured (us) | predicted (us) | error |"
echo "|---|---|---|---|---|"
BAD=0
IFS=, read -r -a NLIST <<<"$NPS"
IFS=, read -r -a SLIST <<<"$SIZES"
for n in "${NLIST[@]}"; do
  topo=$(topology "$n" "$T8" "$COPY" "$RED" "$(nproc)")
  for s in "${SLIST[@]}"; do
    if [ "$n" = 2 ] && [ "$s" = 8 ]; then m=$T8; elif [ "$n" = 2 ] && [ "$s" = 1M ]; then m=$T1M; else m=$(measure "$n" "$s"); fi
    p=$(predict "$topo" "$s")
    if [ -z "$m" ] || [ -z "$p" ]; then echo "| $n | $s | - | ${p:--} | not measured |"; BAD=1; continue; fi
    line=$(python3 -c "
m, p = $m, $p; e = p / m - 1
print(f'| $n | $s | {m:,.0f} | {p:,.0f} | {e:+.0%}{\" (calibration)\" if \"$n\" == \"2\" and \"$s\" in (\"8\", \"1M\") else \"\"} |'); print('BAD' if abs(e) > 0.25 else '')")
    echo "$line" | head -1
    echo "$line" | tail -1 | grep -q BAD && BAD=1
  done
done
echo "# $(uptime)"
exit $BAD

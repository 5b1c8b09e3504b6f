#!/usr/bin/env bash
# The figures of docs/performance.md, measured and drawn in one go: bandwidth and latency
# against size of hmc's same-host paths (hmc-perf), and hmc's all-reduce and all-to-all against
# Open MPI's on the same ranks (hmc-coll-perf, mpi-coll-bench), drawn by bench/hmc_plot.py.
#
#   bench/figures.sh [--out DIR] [--np N] [--quick]
#
# Writes DIR/*.json (the runs, one JSON object per size) and DIR/*.png (default docs/figures).
# Every series of one figure comes from the same run of this script, the series taken one after
# the other: on a noisy machine only such figures compare (docs/performance.md).
#
# Exit status: 0 drawn, 1 a run or the drawing failed (the message names it), 2 bad arguments.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/figures.sh [--out DIR] [--np N] [--quick] [--help]

Measures hmc-perf over hoststage/shm, ucx and ofi/shm (8 B to 4 MiB, send bandwidth and
latency), hmc-coll-perf and mpi-coll-bench (all_reduce and all_to_all, 8 B to 16 MiB) and draws
them with bench/hmc_plot.py.
  --out DIR  where the JSON and the PNG go                         [docs/figures]
  --np N     ranks of the collectives                              [2]
  --quick    fewer iterations and a smaller top size (a smoke run)
  --help     this text

Environment: BUILD_DIR  build directory holding bin/                 [./build]
             MPIRUN     Open MPI's launcher                           [mpirun]
             PYTHON     a Python with matplotlib (Debian's)           [/usr/bin/python3]
EOF
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BUILD_DIR:-$ROOT/build}/bin
OUT=$ROOT/docs/figures
NP=2
QUICK=0
while (($#)); do
  case $1 in
    --out) OUT=${2:?--out wants a directory}; shift ;;
    --np)
      [[ ${2:-} =~ ^[2-9]$|^1[0-6]$ ]] || { echo "figures.sh: --np wants 2..16" >&2; exit 2; }
      NP=$2; shift ;;
    --quick) QUICK=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "figures.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
for tool in hmc-perf hmc-coll-perf mpi-coll-bench; do
  [[ -x $BIN/$tool ]] || { echo "figures.sh: $BIN/$tool is not built" >&2; exit 1; }
done
MPIRUN=${MPIRUN:-mpirun}
PYTHON=${PYTHON:-/usr/bin/python3}
MPI_ARGS=(--oversubscribe --mca btl self,vader -np "$NP")
[[ $(id -u) == 0 ]] && MPI_ARGS=(--allow-run-as-root "${MPI_ARGS[@]}")
mkdir -p "$OUT"

P2P_TOP=4M COLL_TOP=16M ITERS=20
((QUICK)) && P2P_TOP=64K COLL_TOP=64K ITERS=5

run() {  # file, command...: the command's stdout into file, its stderr shown on failure
  local file=$1
  shift
  echo "figures.sh: $*" >&2
  if ! timeout 600 "$@" >"$file" 2>"$file.err"; then
    echo "figures.sh: failed: $*" >&2
    cat "$file.err" >&2
    exit 1
  fi
  rm -f "$file.err"
}

# Point to point: one series per path, each run with only its plugin loaded.
declare -A PATHS=(
  [shm]="HMC_NET_PLUGINS=hoststage HMC_PATH=hoststage/shm"
  [ucx]="HMC_NET_PLUGINS=ucx HMC_PATH=ucx/ucx"
  [ofi-shm]="HMC_NET_PLUGINS=ofi HMC_OFI_PROVIDER=shm HMC_PATH=ofi/shm"
)
P2P_ARGS=()
((QUICK)) && P2P_ARGS=(--iters 50)
for name in shm ucx ofi-shm; do
  read -r -a envs <<<"${PATHS[$name]}"
  for test in bw lat; do
    run "$OUT/p2p-$test-$name.json" env "${envs[@]}" "$BIN/hmc-perf" --loopback --quiet \
      --test "$test" --op send --sizes "8:$P2P_TOP" --format json "${P2P_ARGS[@]}"
  done
done

# Collectives: hmc and Open MPI on the same ranks of this host, one after the other.
for op in all_reduce all_to_all; do
  run "$OUT/coll-$op-hmc.json" "$BIN/hmc-coll-perf" --np "$NP" -o "$op" -b 8 -e "$COLL_TOP" -f 4 \
    -n "$ITERS" --json
  run "$OUT/coll-$op-mpi.json" "$MPIRUN" "${MPI_ARGS[@]}" "$BIN/mpi-coll-bench" -o "$op" -b 8 \
    -e "$COLL_TOP" -f 4 -n "$ITERS" --json
done

PLOT=("$PYTHON" "$ROOT/bench/hmc_plot.py")
"${PLOT[@]}" -o "$OUT/p2p-send-bw.png" --title "send bandwidth, two processes of one host" \
  "$OUT/p2p-bw-shm.json=hoststage/shm" "$OUT/p2p-bw-ucx.json=ucx" "$OUT/p2p-bw-ofi-shm.json=ofi/shm"
"${PLOT[@]}" -o "$OUT/p2p-send-lat.png" --title "send latency (half round trip), one host" \
  "$OUT/p2p-lat-shm.json=hoststage/shm" "$OUT/p2p-lat-ucx.json=ucx" \
  "$OUT/p2p-lat-ofi-shm.json=ofi/shm"
for op in all_reduce all_to_all; do
  "${PLOT[@]}" -o "$OUT/coll-$op.png" --title "$op, $NP ranks of one host: hmc and Open MPI" \
    "$OUT/coll-$op-hmc.json=hmc" "$OUT/coll-$op-mpi.json=Open MPI"
done
echo "figures.sh: drawn in $OUT: $(cd "$OUT" && ls ./*.png | tr '\n' ' ')"

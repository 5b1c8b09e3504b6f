#!/usr/bin/env bash
# The simulator's predictions for hmc's flat collectives against the hierarchical forms over the
# vendor libraries (docs/collectives-simulation.md, "Vendor libraries"), as markdown tables: per
# cluster and size, the time and busbw of each form and the best hierarchical over the best flat.
#
#   bench/coll_sim_ccl.sh [--op all_reduce] [--sizes "-b 1M -e 256M -f 4"] [--step-us 1.2]
#                         [--cases LIST] [--extra SPEC]
#
#   --cases LIST  comma-separated among: split1024 (128 hosts of 8, 64 NVIDIA hosts and 64 AMD),
#                 mixed1024 (128 hosts of 4 NVIDIA + 4 AMD), split512 (64 hosts of 8, 32 and 32),
#                 4+4 (8 hosts of 8, 4 NVIDIA hosts and 4 AMD); default all of them
#   --step-us N   hmc's executor cost per step (executor.step_us) [1.2]
#   --extra SPEC  appended to every cluster spec (",nic_latency_us=5", ...)
#
# Every cluster: 8 NICs of 400 Gb/s per host, the vendor libraries' built-in figures. Forms:
# hmc auto (hmc's own choice: leaders per host), hmc ring, ccl by vendor (a library group per
# vendor, spanning hosts), ccl by host (a group per vendor per host). Tools from
# $BUILD_DIR/bin (default ./build/bin). Exit status 0, 2 for bad arguments or a tool missing.
set -u
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
OP=all_reduce
SIZES="-b 1M -e 256M -f 4"
STEP=1.2
CASES=split1024,mixed1024,split512,4+4
EXTRA=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --op) OP="${2:-}"; shift ;;
    --sizes) SIZES="${2:-}"; shift ;;
    --step-us) STEP="${2:-}"; shift ;;
    --cases) CASES="${2:-}"; shift ;;
    --extra) EXTRA="${2:-}"; shift ;;
    *) echo "coll_sim_ccl.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
SIM="${BUILD_DIR:-./build}/bin/hmc-coll-sim"
[ -x "$SIM" ] || { echo "coll_sim_ccl.sh: $SIM not built" >&2; exit 2; }
command -v python3 >/dev/null || { echo "coll_sim_ccl.sh: wants python3" >&2; exit 2; }
BASE="nics_per_host=8,nic_gbps=400,step_us=$STEP$EXTRA"
spec() {
  case "$1" in
    split1024) echo "hosts=128,host_vendors=cuda:64+hip:64,$BASE" ;;
    mixed1024) echo "hosts=128,vendors=cuda:4+hip:4,$BASE" ;;
    split512) echo "hosts=64,host_vendors=cuda:32+hip:32,$BASE" ;;
    4+4) echo "hosts=8,host_vendors=cuda:4+hip:4,$BASE" ;;
    *) return 1 ;;
  esac
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
IFS=, read -r -a LIST <<<"$CASES"
for c in "${LIST[@]}"; do
  s=$(spec "$c") || { echo "coll_sim_ccl.sh: unknown case '$c'" >&2; exit 2; }
  # shellcheck disable=SC2086
  "$SIM" --cluster "$s" -o "$OP" $SIZES --format json >"$TMP/hmc_auto" || exit 2
  # shellcheck disable=SC2086
  "$SIM" --cluster "$s" -o "$OP" $SIZES --algo ring --format json >"$TMP/hmc_ring" || exit 2
  # shellcheck disable=SC2086
  "$SIM" --cluster "$s" -o "$OP" $SIZES --backend ccl --format json >"$TMP/ccl_vendor" || exit 2
  # shellcheck disable=SC2086
  "$SIM" --cluster "$s" -o "$OP" $SIZES --backend ccl --ccl-groups host --format json \
    >"$TMP/ccl_host" || exit 2
  python3 - "$c" "$s" "$TMP" <<'PY'
import json, sys
case, spec, tmp = sys.argv[1:4]
forms = ["hmc_auto", "hmc_ring", "ccl_vendor", "ccl_host"]
rows = {f: [json.loads(l) for l in open(f"{tmp}/{f}")] for f in forms}
def size(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0: return f"{b // n} {unit}"
    return f"{b} B"
r0 = rows["hmc_auto"][0]
assert all(len(rows[f]) == len(rows["hmc_auto"]) for f in forms)
print(f"\n{case}: `{spec}` ({r0['ranks']} ranks, {r0['hosts']} hosts)\n")
print("| size | hmc auto: us, busbw GB/s | hmc ring | ccl by vendor | ccl by host | best ccl / best hmc |")
print("|---|---|---|---|---|---|")
for i in range(len(rows["hmc_auto"])):
    cells, t = [], {}
    for f in forms:
        r = rows[f][i]
        t[f] = r["time_us"]
        cells.append(f"{r['time_us']:,.0f}, {r['busbw_GBps']:.1f}")
    ratio = min(t["hmc_auto"], t["hmc_ring"]) / min(t["ccl_vendor"], t["ccl_host"])
    print(f"| {size(rows['hmc_auto'][i]['size'])} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
PY
done

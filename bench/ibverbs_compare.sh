#!/usr/bin/env bash
# hmc-perf over net-ibverbs side by side with perftest, on the same Soft-RoCE devices in one boot
# of the RDMA test bed (tests/rdma/guest, rails topology: rxe0/rxe2 on one "host", rxe1/rxe3 on
# the other).
#
#   bench/ibverbs_compare.sh [--reps N] [--quick] [--cpus N] [--only REGEX]
#
# Prints one row per case: metric, hmc value, peer value, ratio (hmc / peer), goal, pass/fail.
# Under QEMU's emulation the figures say nothing about hardware and move with the load of the
# host: only the ratios of one boot mean something. Each round runs every case's two sides one
# right after the other, alternating which goes first from round to round, and the row shows the
# round with the median ratio (of an even count, the less favourable of the middle two).
#
# Cases (rxe0 -> rxe1 unless said):
#   put_bw.4M   hmc-perf --test bw --op put  at 4 MiB     against ib_write_bw -s 4M   >= 0.95
#   send_bw.4M  hmc-perf --test bw --op send at 4 MiB     against ib_write_bw -s 4M   >= 0.95
#   get_bw.4M   hmc-perf --test bw --op get  at 4 MiB     against ib_read_bw -s 4M    >= 0.95
#   send_lat.8  hmc-perf --test lat --op send at 8 B, p50 against ib_send_lat's typical <= 1.10
#   rails.put_bw.64M  hmc-perf put at 64 MiB over rxe0+rxe2 -> rxe1+rxe3 (HMC_IB_RAILS=2)
#                     against the same with HMC_IB_RAILS=1                         >= 1.50
#
# perftest reports MB/s of 2^20 bytes, hmc-perf of 10^6: the rows are in 10^6 bytes/s.
#
# Exit status: 0 every case passed, 1 a case failed or could not be measured, 2 bad arguments,
# 77 the test bed cannot run here.
set -u

usage() {
  cat <<'EOF'
usage: bench/ibverbs_compare.sh [--reps N] [--quick] [--cpus N] [--only REGEX] [--baseline DIR]
                               [--help]

Boots the RDMA test bed once (rails topology) and runs hmc-perf over net-ibverbs and perftest
on the same rxe devices, alternating, and prints per case: metric, hmc, perftest, ratio, goal.

  --reps N    rounds (the median paired ratio is kept)                          [3]
  --quick     fewer iterations, one round unless --reps follows (a smoke run)
  --cpus N    guest vCPUs (one per rail of both sides: 4)                       [4]
  --only RE   only the cases whose name matches the bash regex RE
  --baseline DIR  also run every hmc case with DIR/bin/hmc-perf (another build, e.g. main's),
              in the same rounds, as rows CASE@baseline against the same peer: a change's effect
              measured in one boot
  --help      this text

Environment: BUILD_DIR  build directory holding bin/hmc-perf                    [./build]
             HMC_RDMA_GUEST_DIR  the guest image (tests/rdma/guest --help)
EOF
}

REPS=3
QUICK=0
CPUS=4
ONLY=""
BASELINE=""
IN_GUEST=0
while (($#)); do
  case $1 in
    --reps)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "ibverbs_compare.sh: --reps wants a count >= 1" >&2; exit 2; }
      REPS=$2; shift ;;
    --quick) QUICK=1; REPS=1 ;;
    --cpus)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "ibverbs_compare.sh: --cpus wants a count >= 1" >&2; exit 2; }
      CPUS=$2; shift ;;
    --only)
      [[ -n ${2:-} ]] || { echo "ibverbs_compare.sh: --only wants a regex" >&2; exit 2; }
      ONLY=$2; shift ;;
    --baseline)
      [[ -n ${2:-} ]] || { echo "ibverbs_compare.sh: --baseline wants a build directory" >&2; exit 2; }
      BASELINE=$2; shift ;;
    --in-guest) IN_GUEST=1 ;;  # internal: the part that runs in the guest
    --build-dir) BUILD_DIR=$2; shift ;;  # internal: the guest passes no BUILD_DIR through
    --help|-h) usage; exit 0 ;;
    *) echo "ibverbs_compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$ROOT/build}" 2>/dev/null && pwd) || {
  echo "ibverbs_compare.sh: no build directory ${BUILD_DIR:-$ROOT/build}" >&2; exit 1; }

if ((!IN_GUEST)); then
  [[ -x $BUILD_DIR/bin/hmc-perf ]] || { echo "ibverbs_compare.sh: no $BUILD_DIR/bin/hmc-perf" >&2; exit 1; }
  args=()
  ((QUICK)) && args+=(--quick)
  args+=(--reps "$REPS" --build-dir "$BUILD_DIR")
  shares=(--share "$ROOT" --share "$BUILD_DIR")
  if [[ -n $BASELINE ]]; then
    BASELINE=$(cd "$BASELINE" 2>/dev/null && pwd) && [[ -x $BASELINE/bin/hmc-perf ]] || {
      echo "ibverbs_compare.sh: --baseline: no bin/hmc-perf under it" >&2; exit 2; }
    args+=(--baseline "$BASELINE")
    shares+=(--share "$BASELINE")
  fi
  [[ -n $ONLY ]] && args+=(--only "$ONLY")
  cd "$BUILD_DIR" || exit 1
  exec bash "$ROOT/tests/rdma/guest" run --topology rails --cpus "$CPUS" \
    --mem 3072 --timeout 1800 "${shares[@]}" -- \
    bash "$ROOT/bench/ibverbs_compare.sh" --in-guest "${args[@]}"
fi

# ---- in the guest ---------------------------------------------------------------------------
[[ ${RDMA_TESTBED_TOPOLOGY:-} == rails ]] || { echo "ibverbs_compare.sh: not in the rails test bed" >&2; exit 1; }
BIN=$BUILD_DIR/bin
read -ra H0 <<< "$RDMA_TESTBED_HOST0_DEVS"
read -ra H1 <<< "$RDMA_TESTBED_HOST1_DEVS"
WORK=$(mktemp -d /tmp/ibcmp.XXXXXX)
SERVERS=()
cleanup() {
  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

var() { local n=$1; echo "${!n}"; }
if ((QUICK)); then BW_ITERS=16 LAT_ITERS=500 RAIL_ITERS=4; else BW_ITERS=48 LAT_ITERS=3000 RAIL_ITERS=8; fi
export HMC_NET_PLUGINS=ibverbs HMC_LOG_LEVEL=warn

# An hmc-perf server: BIN, PORT, then the environment it runs with.
start_server() {
  local bin=$1 port=$2; shift 2
  env "$@" timeout 1700 "$bin/hmc-perf" --listen "$port" --forever --timeout 60000 \
    > "$WORK/server-$port.log" 2>&1 &
  SERVERS+=($!)
  for ((i = 0; i < 600; ++i)); do
    grep -q "listening on" "$WORK/server-$port.log" && return 0
    kill -0 "${SERVERS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  cat "$WORK/server-$port.log" >&2
  echo "ibverbs_compare.sh: the hmc-perf server on port $port did not start" >&2
  exit 1
}

# hmc-perf client: prints bw (10^6 B/s) or the median latency (us) of its one size. With
# BASELINE_BIN set, that build's hmc-perf, against its own server (the port + 10).
# hmc PORT KIND(bw|lat) ENV... -- ARGS...
hmc() {
  local port=$1 kind=$2; shift 2
  local bin=$BIN
  [[ -n ${BASELINE_BIN:-} ]] && { bin=$BASELINE_BIN; port=$((port + 10)); }
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local out
  out=$(env "${envs[@]}" timeout 600 "$bin/hmc-perf" --connect "127.0.0.1:$port" --format json \
          --quiet --timeout 60000 "$@" 2> "$WORK/client.err") || {
    echo "hmc-perf $* failed: $(tail -5 "$WORK/client.err")" >&2; return 1; }
  local key=bw_MBps
  [[ $kind == lat ]] && key=lat_us_p50
  # The pair of devices the core chose (where two hosts have several ports on one fabric, it
  # is not always the pair that reaches).
  echo "    hmc-perf $* ${envs[*]}: path $(sed -n 's/.*"path":"\([^"]*\)".*/\1/p' <<< "$out" | tail -1)" >&2
  sed -n "s/.*\"$key\":\([0-9.e+-]*\).*/\1/p" <<< "$out" | tail -1
}

# perftest between a server on DEV1 and a client on DEV0: bw (10^6 B/s: its average of 2^20 B/s
# converted) or latency (its typical, us). perf TOOL KIND DEV0 DEV1 ARGS...
# perftest converts its cycle counts with a clock rate it measures at start (time stamps against
# gettimeofday, refused below a correlation of 0.9): on a loaded emulated guest that measurement
# fails now and then and the figures read 0. Such a run is repeated (twice at most).
PERF_PORT=18600
perf() {
  local v try
  for try in 1 2 3; do
    v=$(perf_once "$@") || return 1
    awk -v v="$v" 'BEGIN { exit !(v + 0 > 0 && v != "inf" && v != "nan") }' && { echo "$v"; return 0; }
    echo "    $1: no figure ($v: its clock-rate measurement failed), again" >&2
  done
  return 1
}
perf_once() {
  local tool=$1 kind=$2 dev0=$3 dev1=$4; shift 4
  local port=$((PERF_PORT++))
  local addr1
  addr1=$(var "RDMA_TESTBED_ADDR_$dev1")
  timeout 300 "$tool" -d "$dev1" -x "$(var "RDMA_TESTBED_GID_$dev1")" -p "$port" -F "$@" \
    > "$WORK/perf-server.log" 2>&1 &
  local server=$!
  for ((i = 0; i < 300; ++i)); do
    ss -ltn 2>/dev/null | grep -q ":$port " && break
    sleep 0.1
  done
  if ! timeout 300 "$tool" -d "$dev0" -x "$(var "RDMA_TESTBED_GID_$dev0")" -p "$port" -F "$@" \
         "$addr1" > "$WORK/perf-client.log" 2>&1; then
    cat "$WORK/perf-client.log" "$WORK/perf-server.log" >&2
    wait $server
    return 1
  fi
  wait $server
  local size
  size=$(awk '$1 == "-s" { getline; print; exit }' <<< "$(printf '%s\n' "$@")")
  local line
  line=$(awk -v s="$size" '$1 == s && NF >= 4 { print; exit }' "$WORK/perf-client.log")
  [[ -n $line ]] || { cat "$WORK/perf-client.log" >&2; return 1; }
  if [[ $kind == bw ]]; then
    awk '{ printf "%.2f\n", $4 * 1.048576 }' <<< "$line"
  else
    awk '{ print $5 }' <<< "$line"
  fi
}

# ---- cases: name | kind | goal | hmc side | peer side ---------------------------------------
# A side is a shell command printing one figure.
D0=${H0[0]} D1=${H1[0]}
CASES=(
  "put_bw.4M|bw|>=0.95|hmc 20001 bw HMC_IB_HCA==$D0 -- --test bw --op put --size 4M --iters $BW_ITERS --warmup 4|perf ib_write_bw bw $D0 $D1 -s 4194304 -n $BW_ITERS"
  "send_bw.4M|bw|>=0.95|hmc 20001 bw HMC_IB_HCA==$D0 -- --test bw --op send --size 4M --iters $BW_ITERS --warmup 4|perf ib_write_bw bw $D0 $D1 -s 4194304 -n $BW_ITERS"
  "get_bw.4M|bw|>=0.95|hmc 20001 bw HMC_IB_HCA==$D0 -- --test bw --op get --size 4M --iters $BW_ITERS --warmup 4|perf ib_read_bw bw $D0 $D1 -s 4194304 -n $BW_ITERS"
  "send_lat.8|lat|<=1.10|hmc 20001 lat HMC_IB_HCA==$D0 -- --test lat --op send --size 8 --iters $LAT_ITERS|perf ib_send_lat lat $D0 $D1 -s 8 -n $LAT_ITERS"
  "rails.put_bw.64M|bw|>=1.50|hmc 20002 bw HMC_IB_HCA==${H0[0]},${H0[1]} HMC_IB_RAILS=2 -- --test bw --op put --size 64M --iters $RAIL_ITERS --warmup 1 --window 2|hmc 20002 bw HMC_IB_HCA==${H0[0]},${H0[1]} HMC_IB_RAILS=1 -- --test bw --op put --size 64M --iters $RAIL_ITERS --warmup 1 --window 2"
)
if [[ -n $ONLY ]]; then
  kept=()
  for c in "${CASES[@]}"; do [[ ${c%%|*} =~ $ONLY ]] && kept+=("$c"); done
  ((${#kept[@]})) || { echo "ibverbs_compare.sh: --only '$ONLY' matches no case" >&2; exit 2; }
  CASES=("${kept[@]}")
fi

need_single=0 need_rails=0
for c in "${CASES[@]}"; do
  [[ $c == *"hmc 20001"* ]] && need_single=1
  [[ $c == *"hmc 20002"* ]] && need_rails=1
done
((need_single)) && start_server "$BIN" 20001 HMC_IB_HCA="=$D1"
((need_rails)) && start_server "$BIN" 20002 HMC_IB_HCA="=${H1[0]},${H1[1]}" HMC_IB_RAILS=2
if [[ -n $BASELINE ]]; then
  ((need_single)) && start_server "$BASELINE/bin" 20011 HMC_IB_HCA="=$D1"
  ((need_rails)) && start_server "$BASELINE/bin" 20012 HMC_IB_HCA="=${H1[0]},${H1[1]}" HMC_IB_RAILS=2
  # Every case again, right after it, with the baseline's hmc-perf on the hmc side (and on
  # both sides of the rails case), named CASE@baseline.
  both=()
  for c in "${CASES[@]}"; do
    IFS='|' read -r name kind goal hside pside <<< "$c"
    [[ $pside == hmc* ]] && pside="BASELINE_BIN=$BASELINE/bin $pside"
    both+=("$c" "$name@baseline|$kind|$goal|BASELINE_BIN=$BASELINE/bin $hside|$pside")
  done
  CASES=("${both[@]}")
fi

echo "ibverbs_compare: $RDMA_TESTBED_HOST0_DEVS -> $RDMA_TESTBED_HOST1_DEVS, $(nproc) vCPUs," \
     "$REPS round(s); $(uname -r)"
declare -A HV PV
fail=0
for ((r = 0; r < REPS; ++r)); do
  for c in "${CASES[@]}"; do
    IFS='|' read -r name kind goal hside pside <<< "$c"
    if ((r % 2 == 0)); then
      h=$(eval "$hside") || h=""
      p=$(eval "$pside") || p=""
    else
      p=$(eval "$pside") || p=""
      h=$(eval "$hside") || h=""
    fi
    HV[$name]+="${h:-x} " PV[$name]+="${p:-x} "
    echo "  round $((r + 1)) $name: hmc ${h:-failed}, peer ${p:-failed}" >&2
  done
done

printf '%-18s %12s %12s %8s %7s  %s\n' metric hmc peer ratio goal verdict
for c in "${CASES[@]}"; do
  IFS='|' read -r name kind goal _ <<< "$c"
  # The round with the median ratio (the less favourable of the middle two of an even count).
  # (No process substitution: the guest has no /dev/fd.)
  read -ra hs <<< "${HV[$name]}"
  read -ra ps <<< "${PV[$name]}"
  pairs=""
  for i in "${!hs[@]}"; do pairs+="${hs[i]} ${ps[i]}"$'\n'; done
  row=$(printf '%s' "$pairs" |
        awk -v kind="$kind" 'NF == 2 && $1 != "x" && $2 != "x" && $2 > 0 && $1 > 0 {
               r = $1 / $2; print r, $1, $2 }' |
        sort -g | awk -v kind="$kind" '{ l[NR] = $0 } END {
               if (NR == 0) exit; i = (kind == "bw") ? int((NR + 1) / 2) : int(NR / 2) + 1; print l[i] }')
  if [[ -z $row ]]; then
    printf '%-18s %12s %12s %8s %7s  %s\n' "$name" - - - "$goal" "FAIL (not measured)"
    fail=1
    continue
  fi
  read -r ratio hv pv <<< "$row"
  ok=$(awk -v r="$ratio" -v g="$goal" 'BEGIN {
         op = substr(g, 1, 2); x = substr(g, 3) + 0
         print ((op == ">=" && r >= x) || (op == "<=" && r <= x)) ? "pass" : "FAIL" }')
  [[ $ok == pass ]] || fail=1
  unit="MB/s"
  [[ $kind == lat ]] && unit="us"
  printf '%-18s %12s %12s %8.3f %7s  %s\n' "$name" "$hv $unit" "$pv $unit" "$ratio" "$goal" "$ok"
done
exit $fail

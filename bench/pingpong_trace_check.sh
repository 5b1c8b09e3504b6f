#!/bin/sh
# Smoke check of the ping-pong probe (ctest bench_pingpong_trace): trace a short raw UCP
# ping-pong over tcp on loopback and check that both processes report turnarounds and that the
# pairing script splits both sides.
#   pingpong_trace_check.sh PROBE.so UCX_TAG_STREAM PAIR_SCRIPT
set -eu
probe=$1 stream=$2 pair=$3
command -v python3 >/dev/null || { echo "python3 is not installed: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
PINGPONG_TRACE_DIR=$dir PINGPONG_TRACE_EVERY=2500 LD_PRELOAD=$probe UCX_TLS=tcp,self \
  UCX_NET_DEVICES=lo "$stream" --pingpong --size 8 --iters 3000 --timeout 30 2>"$dir/err" >/dev/null
reports=$(grep -c '^\[pingpong-trace [0-9]*\] 2500 turnarounds: median [0-9]* ns' "$dir/err" || true)
if [ "$reports" -ne 2 ]; then
  echo "expected a report from each of the two processes, got $reports:"; cat "$dir/err"; exit 1
fi
grep -q 'recv -> ucp_worker_progress returns [0-9]* ns' "$dir/err" || { cat "$dir/err"; exit 1; }
out=$(python3 "$pair" "$dir")
echo "$out"
[ "$(echo "$out" | grep -c 'delivery to it median [0-9]* ns.*its turnaround median [0-9]* ns')" -eq 2 ]

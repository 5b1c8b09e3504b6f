#!/bin/sh
# bench/hmc_plot.py on recorded JSON (data/): the series it reads are the recorded figures
# (--dump), the image it writes is a PNG of a plausible size, a malformed line is refused
# naming the file and line, and it answers --version.
#
#   plot_check.sh HMC_PLOT DATA_DIR
set -eu
plot=$1 data=$2
py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmc-plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plot_check: $*" >&2; exit 1; }

"$py" "$plot" --version | grep -q '^hmc_plot.py (hmc) ' || fail "--version"
"$py" "$plot" --dump "$data/hmc-perf-bw.jsonl=hmc" "$data/hmc-coll-perf.jsonl=coll" > "$tmp/dump"
# Every recorded row is a point: bandwidth in GB/s (hmc-perf's MB/s / 1000), latency in us.
"$py" - "$data" "$tmp/dump" <<'PY' || fail "the series differ from the recorded rows"
import json, sys
data, dump = sys.argv[1], sys.argv[2]
want = set()
for l in open(f"{data}/hmc-perf-bw.jsonl"):
    r = json.loads(l)
    lat = r["lat_us_p50"] if r["lat_us_p50"] is not None else r["lat_us_avg"]
    want.add((f"hmc bw {r['op']} {r['path']}", r["size"], r["bw_MBps"] / 1000, lat))
for l in open(f"{data}/hmc-coll-perf.jsonl"):
    r = json.loads(l)
    want.add((f"coll {r['op']} x{r['ranks']}", r["size"], r["busbw_GBps"], r["time_us"]))
got = set()
for l in open(dump):
    name, size, bw, lat = l.rstrip("\n").split("\t")
    got.add((name, int(size), float(bw), float(lat)))
assert got == want, (sorted(got ^ want))
PY
"$py" "$plot" -o "$tmp/out.png" --title test "$data/hmc-perf-bw.jsonl=hmc" \
  "$data/hmc-perf-lat.jsonl=hmc" "$data/hmc-coll-perf.jsonl=coll" > "$tmp/said"
grep -q '3 series' "$tmp/said" || fail "it said: $(cat "$tmp/said")"
head -c 8 "$tmp/out.png" | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a' || fail "not a PNG"
[ "$(wc -c < "$tmp/out.png")" -gt 20000 ] || fail "the PNG is too small to hold two plots"
printf '{"size": 8}\nnot json\n' > "$tmp/bad.jsonl"
rc=0; "$py" "$plot" -o "$tmp/x.png" "$tmp/bad.jsonl" 2> "$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "a bad file exited $rc"
grep -q 'bad.jsonl:1' "$tmp/err" || fail "the refusal does not name the line: $(cat "$tmp/err")"
echo "plot_check: ok"

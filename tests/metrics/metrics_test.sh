#!/bin/sh
# The metrics (docs/metrics.md): metrics_probe checks the counters after known traffic, through
# hmc_metrics_dump and HMC_METRICS_ADDR's endpoint; promtool (Debian: prometheus) checks every
# text it wrote, and the one HMC_METRICS_FILE wrote at destruction, against Prometheus'
# exposition format and naming rules; without the endpoint, the text says there is none.
#
#   metrics_test.sh PROBE PLUGIN_DIR
set -eu
probe=$1
plugins=$2
command -v promtool >/dev/null || { echo "metrics_test: promtool missing (Debian: prometheus)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export HMC_PLUGIN_PATH=$plugins HMC_NET_PLUGINS=hoststage HMC_HOSTSTAGE_SHM=0

HMC_METRICS_ADDR=0 HMC_METRICS_FILE="$dir/exit-%p.txt" timeout 60 "$probe" "$dir"
for f in "$dir"/dump_a.txt "$dir"/dump_b.txt "$dir"/http_a.txt "$dir"/exit-*.txt; do
  [ -s "$f" ] || { echo "metrics_test: $f is missing or empty" >&2; exit 1; }
  dup=$(grep -v '^#' "$f" | sed 's/ [^ ]*$//' | sort | uniq -d)
  [ -z "$dup" ] || { echo "metrics_test: $f repeats series: $dup" >&2; exit 1; }
  promtool check metrics < "$f" || { echo "metrics_test: promtool refused $f:" >&2; cat "$f" >&2; exit 1; }
done
grep -q '^hmc_transfers_total{' "$dir"/exit-*.txt

# Off by default: no endpoint, no file.
rm -f "$dir"/*.txt
env -u HMC_METRICS_ADDR -u HMC_METRICS_FILE timeout 60 "$probe" "$dir"
if ls "$dir"/exit-*.txt >/dev/null 2>&1; then echo "metrics_test: a file without HMC_METRICS_FILE" >&2; exit 1; fi

# A bad address is refused at context creation, naming the setting.
out=$(HMC_METRICS_ADDR=nonsense:x timeout 60 "$probe" "$dir" 2>&1) && { echo "metrics_test: HMC_METRICS_ADDR=nonsense:x was accepted" >&2; exit 1; }
echo "$out" | grep -q 'HMC_METRICS_ADDR' || { echo "metrics_test: the refusal does not name HMC_METRICS_ADDR: $out" >&2; exit 1; }
echo "metrics_test: ok"

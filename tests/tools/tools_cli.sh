#!/bin/sh
# The tools' options and JSON (tools/common): every tool answers --version and --help with
# status 0 and a bad option with 2; the CLI11 tools take --opt=value and -n5; hmc-info's and
# hmc-coll-perf's JSON parse, and an unknown figure is null.
#
#   tools_cli.sh BIN_DIR PLUGIN_DIR
set -eu
bin=$1
export HMC_PLUGIN_PATH=$2 HMC_NET_PLUGINS=hoststage HMC_NET_CALIBRATE=0
fail() { echo "tools_cli: $*" >&2; exit 1; }
for t in hmc-info hmc-perf hmc-coll-perf hmc-coll-sim hmc-plugin-check hmc-idle-peers hmc-soak \
  hmc_all_reduce_perf; do
  [ -x "$bin/$t" ] || continue
  "$bin/$t" --version | grep -q "^$t (hmc) [0-9]" || fail "$t --version"
  "$bin/$t" --help >/dev/null || fail "$t --help exited $?"
  rc=0; "$bin/$t" --no-such-option >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$t --no-such-option exited $rc, not 2"
done

# hmc-info: --format=json is --json; the JSON parses; unknown figures are null, never 0.
"$bin/hmc-info" --format=json > json1.$$ || fail "hmc-info --format=json"
"$bin/hmc-info" --json > json2.$$ || fail "hmc-info --json"
trap 'rm -f json1.$$ json2.$$' EXIT
/usr/bin/python3 - json1.$$ json2.$$ <<'PY' || fail "hmc-info's JSON"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    for n in d["net_devices"]:
        n.pop("measured_latency_ns", None); n.pop("measured_bandwidth_MBps", None)
assert a == b, "--format=json and --json differ"
shm = [n for n in a["net_devices"] if n["name"] == "shm"][0]
# hoststage declares no figures and has no PCI device: null, not 0 or "".
assert shm["bandwidth_MBps"] is None and shm["pci_path"] is None, shm
assert shm["nic_guid"] is None and shm["max_msg_size"] is None, shm
host = [d for d in a["devices"] if d["is_host"]][0]
assert host["pci_bus_id"] is None and host["uuid"] is None, host
PY
rc=0; "$bin/hmc-info" --format=yaml 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "hmc-info --format=yaml exited $rc"
"$bin/hmc-info" --require=hoststage >/dev/null || fail "hmc-info --require=hoststage"

# hmc-coll-perf: -n1 and --opt=value, JSON rows with null #wrong when not checked.
out=$("$bin/hmc-coll-perf" --minbytes=8 --maxbytes=8 -n1 -w0 --np=2 --json) || fail "hmc-coll-perf"
echo "$out" | /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
assert len(rows) == 1 and rows[0]["size"] == 8 and rows[0]["ranks"] == 2, rows
assert rows[0]["wrong"] is None, rows  # not checked: unknown
' || fail "hmc-coll-perf --json: $out"
out=$("$bin/hmc-coll-perf" -b 8 -e 8 -n1 -w0 --np 2 --json -c)
echo "$out" | grep -q '"wrong":0' || fail "hmc-coll-perf -c --json: $out"
rc=0; "$bin/hmc-coll-perf" -b 1Q 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "hmc-coll-perf -b 1Q exited $rc"

# One size parser and one unit of wait bound: the same answers from every tool.
# usage_error WANT TOOL ARG...: exit status 2 and WANT in the message.
usage_error() {
  want=$1
  shift
  [ -x "$bin/$1" ] || return 0
  rc=0; msg=$("$bin/$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "$* exited $rc, not 2: $msg"
  case $msg in *"$want"*) ;; *) fail "$*: no '$want' in: $msg" ;; esac
}
usage_error "wants milliseconds 1.." hmc-perf --loopback --timeout=1s
usage_error "wants milliseconds 100..3600000, got '10'" hmc-plugin-check --timeout 10 net:hoststage
usage_error "wants milliseconds 200..600000" hmc-soak --timeout 10
usage_error "wants milliseconds 1.." hmc-idle-peers --timeout 0
usage_error "wants a size >= 1, got '1.5'" hmc-perf --loopback --size 1.5
usage_error "wants a size >= 1, got '0'" hmc-coll-perf -b 0 -e 8    # 0 never grew: a run without end
usage_error "wants a size, got '4X'" hmc_all_reduce_perf -b 4X
usage_error "wants a size >= 64, got '32'" hmc-soak --max-size 32
usage_error "option --bind is for the server" hmc-perf --loopback --bind=0.0.0.0
usage_error "give --size or --sizes, not both" hmc-perf --loopback --size 8 --sizes 1:8
# hmc-perf with CLI11's forms: --opt=value, a size with a fraction that comes out whole.
out=$("$bin/hmc-perf" --loopback --size=1.5K --iters=2 --warmup=0 --format=json --quiet --timeout=20000) ||
  fail "hmc-perf --loopback --size=1.5K"
echo "$out" | grep -q '"size":1536' || fail "hmc-perf --size=1.5K: $out"
echo "tools_cli: ok"

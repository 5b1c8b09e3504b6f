#!/bin/sh
# hmc-perf --listen --forever keeps serving after bad clients: silent, random bytes, a wrong
# frame version, connect-and-close. A real client then runs, twice, and the server's log names
# the bad connectors by their address.
#   perf_listen_forever.sh HMC_PERF HMC_TEST_FLOOD PLUGIN_DIR
set -u
perf=$1
flood=$2
export HMC_PLUGIN_PATH=$3
unset HMC_AUTH_TOKEN HMC_PATH HMC_NET_PLUGINS HMC_TIMEOUT_MS
export HMC_NET_PLUGINS=hoststage HMC_NET_CALIBRATE=0 HMC_HANDSHAKE_TIMEOUT_MS=1000

work=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  echo "--- server log:"
  cat "$work/server.log"
  exit 1
}

# A port that is free now; another process may take it first, so try a few.
for try in 1 2 3 4 5; do
  port=$(( 20000 + ($$ * 7 + try * 7919) % 40000 ))
  "$perf" --listen "$port" --forever >"$work/server.log" 2>&1 &
  server=$!
  i=0
  while [ $i -lt 100 ] && ! grep -q "listening on" "$work/server.log"; do sleep 0.05; i=$((i + 1)); done
  sleep 0.2
  kill -0 "$server" 2>/dev/null && break
  server=
done
[ -n "$server" ] || fail "hmc-perf --listen did not start"

"$flood" "tcp:127.0.0.1:$port" silent=4 random=8 bad-version=8 close=8 hold-ms=1500 \
  >"$work/flood.log" 2>&1 || fail "the flooder failed: $(cat "$work/flood.log")"

for run in 1 2; do
  "$perf" --connect "127.0.0.1:$port" --size 8 --iters 100 --quiet >"$work/client$run.log" 2>&1 ||
    fail "client run $run failed: $(cat "$work/client$run.log")"
done
kill -0 "$server" 2>/dev/null || fail "the server exited"
grep -q "incoming connector tcp 127.0.0.1:[0-9]* failed" "$work/server.log" ||
  fail "the server's log does not name a bad connector by its address"
grep -q "serving .* (tcp 127.0.0.1:[0-9]*)" "$work/server.log" ||
  fail "the server's log does not name the client by its address"
echo "ok: served 2 clients after $(grep -c "incoming connector" "$work/server.log") logged bad connectors"

#!/usr/bin/env bash
# Ranks on two "hosts": two network namespaces joined by a veth pair, each with its own UTS
# namespace and hostname (hmc's host id is "<hostname>/<boot_id>"), two ranks in each. Every
# collective runs checked (netns_rank), with all-reduce's hierarchy forced (HMC_COLL_ALGO) and
# then chosen by hmc (and once more meeting through a Redis server on the first host, where
# redis-server is installed); each rank checks that its same-host peers got shared memory and
# the others TCP; this script checks the algorithms each collective ran (from the ranks' debug
# logs) and that the traffic between the hosts crossed the veth.
#
#   netns_test.sh NETNS_RANK PLUGIN_DIR
#
# Exit status 77 (skipped) when not root or without ip netns / unshare. Namespaces and veth
# have names unique to this run and are removed on any exit.
set -euo pipefail
RANK_BIN=$1
PLUGIN_DIR=$2

source "$(dirname "$0")/two_hosts.sh"
two_hosts hmc-a hmc-b hv 10.200.1

veth_bytes() {
  local rx tx
  rx=$(ip netns exec "$NS_A" cat /sys/class/net/"$VETH_A"/statistics/rx_bytes)
  tx=$(ip netns exec "$NS_A" cat /sys/class/net/"$VETH_A"/statistics/tx_bytes)
  echo $((rx + tx))
}

export HMC_PLUGIN_PATH=$PLUGIN_DIR HMC_NET_PLUGINS=hoststage HMC_DEVICE_PLUGINS=^cuda,^hip,^mlu,^musa
export HMC_NET_CALIBRATE=0 HMC_DEVICE_COPY_CALIBRATE=0 HMC_TIMEOUT_MS=15000
# The debug log names each collective's algorithm; one file a rank.
LOGS=$(mktemp -d)
export HMC_LOG_LEVEL=debug
export HMC_WORLD_SIZE=4 NETNS_HOSTS=0,0,1,1 NETNS_BACKEND=hmc

# One host: its namespace, its hostname, its two ranks; fails when either rank fails.
# timeout ends the whole process group, ranks included.
host() { # ns, address, hostname, first rank, rendezvous, algorithm
  timeout -s KILL 60 ip netns exec "$1" unshare -u bash -c '
    hostname "$3"
    export HMC_LISTEN_HOST=$2 HMC_RENDEZVOUS=$5 HMC_COLL_ALGO=$6
    HMC_RANK=$4 "$0" & a=$!
    HMC_RANK=$(($4 + 1)) "$0" & b=$!
    wait $a && wait $b' "$RANK_BIN" "$1" "$2" "$3" "$4" "$5" "$6"
}

# A third round meets through a Redis server on the first host, where one is installed.
rounds=("hierarchical tcp" "auto tcp")
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
  # With a password: Redis answers other hosts only then (and the password's path is tested).
  ip netns exec "$NS_A" redis-server --bind $ADDR_A --port 6379 --save '' --appendonly no \
    --dir /tmp --requirepass "hmc-$tag" >/dev/null &
  disown # the namespace's cleanup ends it
  for _ in $(seq 100); do
    [[ $(ip netns exec "$NS_A" redis-cli -h $ADDR_A -a "hmc-$tag" ping 2>/dev/null) == PONG ]] && break
    sleep 0.05
  done
  rounds+=("auto redis")
else
  echo "(no redis-server: the round over a Redis rendezvous is left out)"
fi

port=29400
for round in "${rounds[@]}"; do
  read -r algo store <<<"$round"
  [[ $algo == auto ]] && algo=
  port=$((port + 1))
  before=$(veth_bytes)
  rdv=tcp://$ADDR_A:$port
  [[ $store == redis ]] && rdv=redis://:hmc-$tag@$ADDR_A:6379/netns-$tag
  echo "== all-reduce ${algo:-as hmc chooses}; rendezvous $rdv"
  rm -f "$LOGS"/*
  export HMC_LOG_FILE=$LOGS/rank-%p.log
  pids=()
  host "$NS_A" $ADDR_A hmc-host-a 0 "$rdv" "$algo" &
  pids+=($!)
  host "$NS_B" $ADDR_B hmc-host-b 2 "$rdv" "$algo" &
  pids+=($!)
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  pids=()
  [[ $status -eq 0 ]] || { echo "FAILED: a rank failed (above)"; exit 1; }
  # Each collective ran the algorithm it should have on every rank.
  if [[ $algo == hierarchical ]]; then
    want=(hmc_all_reduce hierarchical hmc_broadcast hierarchical hmc_all_gather hierarchical)
  else
    want=(hmc_all_reduce hierarchical hmc_broadcast tree hmc_all_gather ring)
  fi
  for ((i = 0; i < ${#want[@]}; i += 2)); do
    op=${want[i]} name=${want[i + 1]}
    ranks=$( (grep -l "$op (.* bytes out, $name, rank" "$LOGS"/rank-*.log || true) | wc -l)
    others=$( (grep -h "$op (.* bytes out, " "$LOGS"/rank-*.log || true) |
      (grep -vc " bytes out, $name, rank" || true))
    if ((ranks != 4 || others != 0)); then
      echo "FAILED: $op ran $name on $ranks of 4 ranks, and $others times something else"
      exit 1
    fi
  done
  crossed=$(($(veth_bytes) - before))
  echo "veth $VETH_A carried $crossed bytes"
  # Between the hosts, at least the blocks of the all-gathers and all-to-alls that cross (a few
  # hundred KiB); well under what the run moves, well over the control traffic alone.
  if ((crossed < 200000)); then
    echo "FAILED: only $crossed bytes crossed the veth between the hosts"
    exit 1
  fi
done
echo "PASSED"

#!/usr/bin/env bash
# A mixed communicator across two "hosts" (network namespaces joined by a veth pair, each with
# its own hostname): on each, one rank on emulated CUDA memory and one on the other vendor's
# (HIP, or Cambricon MLU), so that the cuda group and the other group each span both hosts.
# Every collective runs checked (netns_rank with NETNS_MEM) through the hierarchical forms,
# HMC_COLL_BACKEND=ccl: NCCL within the cuda ranks, RCCL (hip) or CNCL (mlu) within the others
# (the emulated libraries of tests/fakes), hmc's paths between them; this script checks from the
# ranks' logs that every rank ran them so. What a library lacks (CNCL: the average) its group
# runs on hmc's paths within the same hierarchical form.
#
#   netns_hier_test.sh NETNS_RANK PLUGIN_DIR FAKES_DIR [hip|mlu]     (default hip)
#
# Exit status 77 (skipped) when not root or without ip netns / unshare. Namespaces and veth
# have names unique to this run and are removed on any exit.
set -euo pipefail
RANK_BIN=$1
PLUGIN_DIR=$2
FAKES=$3
OTHER=${4:-hip}
case $OTHER in
  hip) OTHER_CCL=rccl ;;
  mlu) OTHER_CCL=cncl ;;
  *) echo "netns_hier_test.sh: the other vendor is hip or mlu, not '$OTHER'" >&2; exit 2 ;;
esac

source "$(dirname "$0")/two_hosts.sh"
two_hosts hmc-ha hmc-hb hh 10.200.2

export HMC_PLUGIN_PATH=$PLUGIN_DIR HMC_NET_PLUGINS=hoststage
export HMC_NET_CALIBRATE=0 HMC_DEVICE_COPY_CALIBRATE=0 HMC_TIMEOUT_MS=15000
export HMC_CCL_PLUGINS=nccl,$OTHER_CCL HMC_COLL_BACKEND=ccl FAKENCCL_TIMEOUT_MS=12000
export HMC_NCCL_LIBRARY=$FAKES/nccl/libnccl.so.2 HMC_NCCL_CUDA_LIBRARY=$FAKES/cuda/libcuda.so.1
export HMC_RCCL_LIBRARY=$FAKES/rccl/librccl.so.1 HMC_RCCL_HIP_LIBRARY=$FAKES/hip6/libamdhip64.so.6
export HMC_CNCL_LIBRARY=$FAKES/cncl/libcncl.so HMC_CNCL_CNRT_LIBRARY=$FAKES/mlu/libcnrt.so
export HMC_CUDA_LIBRARY=$FAKES/cuda/libcuda.so.1 HMC_HIP_LIBRARY=$FAKES/hip6/libamdhip64.so.6
export HMC_MLU_LIBRARY=$FAKES/mlu/libcnrt.so
LOGS=$(mktemp -d)
export HMC_LOG_LEVEL=info HMC_LOG_FILE=$LOGS/rank-%p.log
export HMC_WORLD_SIZE=4 NETNS_HOSTS=0,0,1,1 NETNS_BACKEND=hierarchical HMC_RENDEZVOUS=tcp://$ADDR_A:29500

# One host: its namespace, its hostname, its two ranks (a cuda one, then a hip one); fails when
# either rank fails. timeout ends the whole process group, ranks included.
host() { # ns, address, hostname, first rank, device ordinal
  timeout -s KILL 60 ip netns exec "$1" unshare -u bash -c '
    hostname "$3"
    export HMC_LISTEN_HOST=$2
    HMC_RANK=$4 HMC_DEVICE_PLUGINS=cuda NETNS_MEM=cuda:$5 "$0" & a=$!
    HMC_RANK=$(($4 + 1)) HMC_DEVICE_PLUGINS=$6 NETNS_MEM=$6:$5 "$0" & b=$!
    wait $a && wait $b' "$RANK_BIN" "$1" "$2" "$3" "$4" "$5" "$OTHER"
}

host "$NS_A" $ADDR_A hmc-host-a 0 0 &
pids+=($!)
host "$NS_B" $ADDR_B hmc-host-b 2 1 &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
pids=()
[[ $status -eq 0 ]] || { echo "FAILED: a rank failed (above)"; exit 1; }
want="runs its collectives hierarchically: cuda x2 (nccl), $OTHER x2 ($OTHER_CCL)"
ranks=$( (grep -l "$want" "$LOGS"/rank-*.log || true) | wc -l)
if ((ranks != 4)); then
  echo "FAILED: $ranks of 4 ranks logged \"$want\""
  exit 1
fi
echo "PASSED"

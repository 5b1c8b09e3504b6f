# Two "hosts" for the netns tests, sourced by netns_test.sh and netns_hier_test.sh: two network
# namespaces joined by a veth pair, with names unique to this run, removed on any exit together
# with what still runs in them (this run's ranks), the pids in `pids` and the folder in LOGS.
#
#   two_hosts NAME_A NAME_B VETH_PREFIX SUBNET   (e.g. two_hosts hmc-a hmc-b hv 10.200.1)
#
# sets tag (this run's), NS_A NS_B VETH_A VETH_B ADDR_A (SUBNET.1) ADDR_B (SUBNET.2). skip MESSAGE exits 77
# (skipped): not root, no ip netns or unshare.

skip() {
  echo "SKIPPED: $*"
  exit 77
}

two_hosts_cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for ns in "$NS_A" "$NS_B"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true # takes its end of the veth, and so the pair
  done
  rm -rf "$LOGS"
}

two_hosts() {
  [[ $(id -u) -eq 0 ]] || skip "network namespaces need root (this runs as uid $(id -u))"
  command -v ip >/dev/null || skip "ip (iproute2) is not installed"
  command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
  tag=$$$RANDOM
  NS_A=$1-$tag NS_B=$2-$tag
  VETH_A=$3${tag}a VETH_B=$3${tag}b
  VETH_A=${VETH_A:0:15} VETH_B=${VETH_B:0:15} # at most 15 characters
  ADDR_A=$4.1 ADDR_B=$4.2
  pids=()
  LOGS=
  trap two_hosts_cleanup EXIT
  trap 'exit 1' INT TERM
  ip netns add "$NS_A" 2>/dev/null || skip "ip netns add failed: no network namespaces here"
  ip netns add "$NS_B"
  ip link add "$VETH_A" type veth peer name "$VETH_B"
  ip link set "$VETH_A" netns "$NS_A"
  ip link set "$VETH_B" netns "$NS_B"
  ip -n "$NS_A" addr add "$ADDR_A"/24 dev "$VETH_A"
  ip -n "$NS_B" addr add "$ADDR_B"/24 dev "$VETH_B"
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" link set "$VETH_A" up
  ip -n "$NS_B" link set "$VETH_B" up
}

#!/bin/sh
# hmc-info's "device memory to other processes" section with an emulated GPU: the ways to other
# hosts name only nets that reach other hosts. hoststage/shm (HMC_NET_FLAG_SAME_HOST) registers
# device memory by dma-buf as hoststage/tcp does, but is never a way to another host.
#
#   info_device_paths.sh HMC_INFO PLUGIN_DIR LIBCUDA
set -eu
[ $# -eq 3 ] || { echo "usage: $0 HMC_INFO PLUGIN_DIR LIBCUDA" >&2; exit 2; }
fail() { echo "info_device_paths: $*" >&2; exit 1; }
out=$(env HMC_PLUGIN_PATH="$2" HMC_NET_PLUGINS=hoststage HMC_DEVICE_PLUGINS=cuda \
  HMC_CUDA_LIBRARY="$3" HMC_NET_CALIBRATE=0 HMC_DEVICE_COPY_CALIBRATE=0 "$1") ||
  fail "hmc-info exited $?"
printf '%s\n' "$out"
# The section is there, for the emulated CUDA devices, and shm is one of the nets listed above.
printf '%s\n' "$out" | grep -q '^device memory to other processes' || fail "no device paths section"
printf '%s\n' "$out" | grep -q '^  cuda$' || fail "no cuda entry in the device paths"
printf '%s\n' "$out" | grep -q 'hoststage/shm' || fail "hoststage/shm is not among the net devices"
others=$(printf '%s\n' "$out" | sed -n '/^  cuda$/,/^  [^ ]/p' | grep '^    other hosts ') ||
  fail "no 'other hosts' line for cuda"
case $others in
  *shm*) fail "a same-host-only net is named as a way to other hosts: $others" ;;
esac
# hoststage/tcp reaches other hosts and registers the emulated runtime's dma-bufs: it is named.
case $others in
  *"direct on hoststage/tcp (dma-buf), else staged"*) ;;
  *) fail "expected device memory to other hosts direct on hoststage/tcp only: $others" ;;
esac
echo "info_device_paths: ok"

#!/bin/sh
# A reason longer than hmc_plugin_info_t's 256-byte field says it was cut: a broken plugin in a
# directory whose path makes dlopen's message long is listed by hmc-info with its reason ending
# in "...".
#
# usage: long_reason.sh HMC_INFO
set -eu
[ $# -eq 1 ] || { echo "usage: $0 HMC_INFO" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/hmc-long-reason.XXXXXX")
trap 'rm -rf "$work"' EXIT
a=$(printf '%0120d' 0)
dir=$work/$a/$a
mkdir -p "$dir"
printf '\177ELF not really an object' >"$dir/libhmc-net-junk.so"
HMC_PLUGIN_PATH=$dir HMC_NET_PLUGINS=junk "$1" >"$work/out" 2>&1 || true
line=$(sed -n 's/^ *reason: \(dlopen failed: .*\)$/\1/p' "$work/out")
[ -n "$line" ] || { cat "$work/out" >&2; echo "FAIL: no dlopen reason listed" >&2; exit 1; }
case $line in
  *...) ;;
  *) echo "FAIL: a cut reason does not end with '...': $line" >&2; exit 1 ;;
esac
[ "${#line}" -eq 255 ] || { echo "FAIL: the reason is ${#line} bytes, not 255: $line" >&2; exit 1; }
echo "ok: the reason is cut to 255 bytes and says so"

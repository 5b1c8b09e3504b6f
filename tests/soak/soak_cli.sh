#!/bin/sh
# hmc-soak's --help, --version and bad input (exit status 2, saying what was wrong).
set -u
soak=$1
fail() { echo "soak_cli: $*" >&2; exit 1; }
"$soak" --help | grep -q -- '--faults' || fail "--help does not list --faults"
"$soak" --version | grep -q '^hmc-soak (hmc) [0-9]' || fail "--version"
expect2() {
  want=$1
  shift
  msg=$("$soak" "$@" 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "$* exited $rc, not 2"
  echo "$msg" | grep -q -- "$want" || fail "$*: no '$want' in: $msg"
}
expect2 'expected a size' --max-size 12Q
expect2 'flood' --faults kill,flood
expect2 'np' --np 0
expect2 'NAME=LIBRARY' --vendor cuda
expect2 'unknown vendor' --vendor rocm=/x.so
echo "soak_cli: as expected"

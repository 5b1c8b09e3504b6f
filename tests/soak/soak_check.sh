#!/bin/sh
# Runs hmc-soak and checks its exit status and its JSON summary.
#   soak_check.sh EXPECT_RC HMC_SOAK [hmc-soak arguments...]
# EXPECT_RC 0: the run passed, with no corrupted, lost or hung request, and at least one
# payload verified and one epoch without error; 1: the run failed (the self-test of
# --inject-corruption), with corrupted payloads counted.
set -u
want=$1
soak=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$soak" --json "$out" "$@"
rc=$?
echo "hmc-soak exited $rc"
cat "$out"
if [ "$rc" != "$want" ]; then
  echo "soak_check: expected exit status $want, got $rc" >&2
  exit 1
fi
field() { sed -n "s/^  \"$1\": \([0-9]*\),*$/\1/p" "$out"; }
if [ "$want" = 0 ]; then
  for f in corrupted lost hangs requests_not_ended crashes; do
    [ "$(field $f)" = 0 ] || { echo "soak_check: $f is $(field $f), not 0" >&2; exit 1; }
  done
  [ "$(field payloads_verified)" -gt 0 ] || { echo "soak_check: nothing verified" >&2; exit 1; }
  [ "$(field epochs_ok)" -gt 0 ] || { echo "soak_check: no epoch ended well" >&2; exit 1; }
  [ "$(field requests_posted)" = "$(field requests_ended)" ] ||
    { echo "soak_check: posted and ended requests differ" >&2; exit 1; }
  # Every fault kind asked for happened at least once, or was skipped saying why (veth without
  # root, netem where the kernel lacks it).
  for kind in ${SOAK_CHECK_FAULTS:-}; do
    if grep -q "^    \"$kind\": \"" "$out"; then
      echo "soak_check: $kind skipped: $(sed -n "s/^    \"$kind\": \"\(.*\)\",*$/\1/p" "$out")"
      continue
    fi
    grep -q "\"kind\": \"$kind\"" "$out" || { echo "soak_check: no $kind fault injected" >&2; exit 1; }
  done
else
  [ "$(field corrupted)" -gt 0 ] || { echo "soak_check: corruption not counted" >&2; exit 1; }
fi
echo "soak_check: as expected"

#!/bin/sh
# Runs hmc-plugin-check (or any command) and checks both its exit status and that its output
# contains each TEXT (the verdict of a good plugin; the failed check and the rule it states for a
# broken one).
#
# usage: expect_check.sh STATUS TEXT... -- COMMAND [ARG...]
set -u
usage() { echo "usage: $0 STATUS TEXT... -- COMMAND [ARG...]" >&2; exit 2; }
[ $# -ge 4 ] || usage
want=$1
shift
texts_file=$(mktemp "${TMPDIR:-/tmp}/expect-check.XXXXXX")
trap 'rm -f "$texts_file"' EXIT
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  printf '%s\n' "$1" >>"$texts_file"
  shift
done
[ $# -ge 2 ] || usage
shift
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
[ "$got" -eq "$want" ] || { echo "FAIL: exit status $got, expected $want" >&2; exit 1; }
while IFS= read -r text; do
  case $out in
    *"$text"*) ;;
    *) echo "FAIL: the output does not contain: $text" >&2; exit 1 ;;
  esac
done <"$texts_file"

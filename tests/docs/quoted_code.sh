#!/bin/sh
# Checks that every code block a document marks as a quote of a file equals that file. The mark
# is a line "<!-- quote: PATH -->" (PATH relative to SOURCE_DIR) right before the opening fence.
#
# usage: quoted_code.sh SOURCE_DIR DOC...      DOC relative to SOURCE_DIR
set -eu
[ $# -ge 2 ] || { echo "usage: $0 SOURCE_DIR DOC..." >&2; exit 2; }
src=$1
shift
work=$(mktemp -d "${TMPDIR:-/tmp}/hmc-quoted-code.XXXXXX")
trap 'rm -rf "$work"' EXIT

failed=0
quotes=0
for doc in "$@"; do
  [ -f "$src/$doc" ] || { echo "FAIL: $doc does not exist" >&2; failed=1; continue; }
  # Writes each quoted block to $work/<n>.block and its path to $work/<n>.path.
  rm -f "$work"/*.block "$work"/*.path
  awk -v dir="$work" -v doc="$doc" '
    state == 2 && /^```/ { state = 0; next }
    state == 2 { print > (dir "/" n ".block"); next }
    state == 1 {
      if ($0 ~ /^```/) { state = 2; printf "" > (dir "/" n ".block"); next }
      printf "%s: the line after <!-- quote: %s --> must open a code block\n", doc, path > "/dev/stderr"
      bad = 1; state = 0
    }
    match($0, /^<!-- quote: [^ ]+ -->$/) {
      path = substr($0, 13, length($0) - 16); n++
      print path > (dir "/" n ".path"); state = 1
    }
    END { if (state != 0) { print doc ": a quoted block does not end" > "/dev/stderr"; bad = 1 }
          exit bad }' "$src/$doc" || failed=1
  for p in "$work"/*.path; do
    [ -e "$p" ] || continue
    quotes=$((quotes + 1))
    file=$(cat "$p")
    block=${p%.path}.block
    if [ ! -f "$src/$file" ]; then
      echo "FAIL: $doc quotes $file, which does not exist" >&2
      failed=1
    elif ! diff -u "$src/$file" "$block" >"$work/diff"; then
      echo "FAIL: $doc quotes $file, but its block differs from the file (--- file, +++ $doc):" >&2
      cat "$work/diff" >&2
      echo "Copy the file into the block (or the block into the file, if the file is behind)." >&2
      failed=1
    fi
  done
done
[ $quotes -gt 0 ] || { echo "FAIL: no quoted code found in $*" >&2; exit 1; }
[ $failed -eq 0 ] || exit 1
echo "$quotes quoted file(s) match"

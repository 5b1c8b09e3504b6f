#!/bin/sh
# `hmc-info --config --format markdown` against docs/configuration.md: the same headings and the
# same variables in the same order (help texts may differ: the C API cuts them at 255 bytes), and
# every table row has exactly three cells.
#
# usage: hmc_info_markdown.sh HMC_INFO DOC
set -eu
[ $# -eq 2 ] || { echo "usage: $0 HMC_INFO DOC" >&2; exit 2; }
info=$1 doc=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/hmc-info-markdown.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The tables document the defaults of every plugin: no HMC_ setting of the caller applies.
for v in $(env | sed -n 's/^\(HMC_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
rc=0
"$info" --config --format markdown >"$work/info.md" 2>"$work/info.log" || rc=$?
if [ $rc -ne 0 ]; then
  cat "$work/info.log" >&2
  echo "FAIL: hmc-info --config --format markdown exited with $rc" >&2
  exit 1
fi

# Headings and first cells, in order.
outline() { sed -n -e 's/^\(### .*\)$/\1/p' -e 's/^| `\(HMC_[A-Z0-9_]*\)` |.*/\1/p' "$1"; }
awk '/^<!-- BEGIN GENERATED/ { inside = 1; next } /^<!-- END GENERATED/ { inside = 0 } inside' \
  "$doc" >"$work/doc.md"
outline "$work/doc.md" >"$work/doc.outline"
outline "$work/info.md" >"$work/info.outline"

for s in $(sed -n 's/^### //p' "$work/doc.outline"); do
  grep -q -x "### $s" "$work/info.outline" || {
    echo "SKIP: hmc-info lists no variables of $s here (the plugin was not built or does not load)" >&2
    exit 77
  }
done
if ! diff -u "$work/doc.outline" "$work/info.outline" >"$work/diff"; then
  echo "FAIL: hmc-info --config --format markdown and $doc list different variables" >&2
  echo "(--- the page, +++ hmc-info):" >&2
  cat "$work/diff" >&2
  exit 1
fi

# A row is | name | default | meaning |: four bars that are not escaped.
bad=$(grep '^|' "$work/info.md" | sed 's/\\|//g' | awk -F'|' 'NF != 5' | head -3)
if [ -n "$bad" ]; then
  echo "FAIL: rows without exactly three cells:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "hmc-info --config --format markdown: $(grep -c . "$work/info.outline") lines agree with $doc"

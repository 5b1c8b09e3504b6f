#!/bin/sh
# docs/architecture.md names every plugin folder (plugins/<kind>-<name>, as kind-name or in a
# brace list on one line, such as net-{hoststage,ucx}) and every tool folder (tools/<name>).
#
#   architecture_lists.sh SOURCE_DIR
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
cd "$1"
doc=docs/architecture.md
missing=""
for d in plugins/*-*/; do
  d=${d%/}; d=${d#plugins/}
  kind=${d%%-*} name=${d#*-}
  grep -qE "$kind-$name([^a-z]|\$)|$kind-\{([a-z]+,)*$name[,}]" "$doc" || missing="$missing plugins/$d"
done
for d in tools/*/; do
  d=${d%/}; d=${d#tools/}
  grep -q "$d" "$doc" || missing="$missing tools/$d"
done
[ -z "$missing" ] || { echo "FAIL: $doc does not name:$missing" >&2; exit 1; }
echo "every plugin and tool folder is named in $doc"

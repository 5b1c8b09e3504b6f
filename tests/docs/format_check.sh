#!/bin/sh
# The tree is formatted with its .clang-format: fails naming every C or C++ source file that
# clang-format would change (fix: clang-format -i FILE). Exit 77 (ctest: skipped) without
# clang-format, which `scripts/hmc-dev test` installs.
#
#   format_check.sh SOURCE_DIR
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
cd "$1"
command -v clang-format >/dev/null 2>&1 || { echo "SKIP: no clang-format (apt-get install clang-format)" >&2; exit 77; }
if [ -d .git ] || [ -f .git ]; then
  files=$(git ls-files '*.c' '*.cpp' '*.h' '*.hpp')
else
  files=$(find core plugins sdk tools tests python examples bench -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp')
fi
bad=0
for f in $files; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f" >&2
    bad=$((bad + 1))
  fi
done
[ "$bad" -eq 0 ] || { echo "FAIL: $bad files differ from clang-format's output (clang-format -i them)" >&2; exit 1; }
echo "all $(echo "$files" | wc -w) source files formatted"

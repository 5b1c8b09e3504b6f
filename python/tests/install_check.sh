#!/bin/sh
# Installs the build tree into a temporary prefix and runs a program with the installed package
# alone: no PYTHONPATH into the build tree, no HMC_PLUGIN_PATH (the extension must find libhmc,
# and libhmc its plugins, from where they were installed).
#
# usage: install_check.sh BUILD_DIR PYTHON INSTALL_DIR PROGRAM     INSTALL_DIR relative to the prefix
set -eu
[ $# -eq 4 ] || { echo "usage: $0 BUILD_DIR PYTHON INSTALL_DIR PROGRAM" >&2; exit 2; }
build=$1 python=$2 dir=$3 program=$4
prefix=$(mktemp -d "${TMPDIR:-/tmp}/hmc-python-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cd "$prefix"
env -u HMC_PLUGIN_PATH PYTHONPATH="$prefix/$dir" "$python" "$program"

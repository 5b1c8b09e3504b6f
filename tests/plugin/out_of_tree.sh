#!/bin/sh
# The SDK as a vendor sees it. Installs this build into a temporary prefix, checks the package's
# contents, builds both plugin templates (copied from the installed share/hmc/templates) against it
# with find_package(hmc-sdk), checks that each exports only its entry symbol, and has the core's
# loader load them (and send messages through the net template).
#
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR CMAKE GENERATOR C_COMPILER HMC_PLUGIN_CHECK
set -eu
[ $# -eq 6 ] || { echo "usage: $0 BUILD_DIR SOURCE_DIR CMAKE GENERATOR C_COMPILER HMC_PLUGIN_CHECK" >&2; exit 2; }
build=$1 src=$2 cmake=$3 generator=$4 cc=$5 check=$6

work=$(mktemp -d "${TMPDIR:-/tmp}/hmc-out-of-tree.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
# Runs a command quietly; shows its output when it fails.
quiet() {
  log=$work/step.log
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$*"; }
}

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || {
  cat "$work/install.log" >&2
  fail "cmake --install $build failed (this test installs the whole build: build all targets first)"
}

for f in include/hmc/hmc.h include/hmc/plugin/common.h include/hmc/plugin/device.h \
         include/hmc/plugin/net.h lib/cmake/hmc-sdk/hmc-sdk-config.cmake \
         lib/cmake/hmc-sdk/hmc-sdk-config-version.cmake lib/cmake/hmc-sdk/hmc-sdk-targets.cmake \
         lib/cmake/hmc-sdk/HmcPlugin.cmake share/hmc/templates/device/CMakeLists.txt \
         share/hmc/templates/net/CMakeLists.txt; do
  [ -f "$prefix/$f" ] || fail "the installed package lacks $f"
done
ls "$prefix"/lib/libhmc.so* >/dev/null 2>&1 || fail "the installed package lacks lib/libhmc.so"
# Every plugin built in-tree is installed beside the library.
if [ -d "$build/lib/hmc" ]; then
  for so in "$build"/lib/hmc/*.so; do
    [ -e "$so" ] || continue
    [ -f "$prefix/lib/hmc/$(basename "$so")" ] || fail "in-tree plugin $(basename "$so") is not installed in lib/hmc"
  done
fi
# The package must be relocatable: nothing in it may point back into the source or build tree.
if grep -rl -e "$src" -e "$build" "$prefix/lib/cmake" "$prefix/share/hmc" >&2; then
  fail "installed package files refer to the source or build tree"
fi

plugin_path=""
for kind in device net; do
  cp -R "$prefix/share/hmc/templates/$kind" "$work/$kind"
  quiet "$cmake" -S "$work/$kind" -B "$work/$kind-build" -G "$generator" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  quiet "$cmake" --build "$work/$kind-build"
  so=$work/$kind-build/libhmc-$kind-template.so
  [ -f "$so" ] || fail "building the $kind template did not produce $so"
  entry=hmc_device_plugin_v1
  [ "$kind" = net ] && entry=hmc_net_plugin_v2
  exported=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort | tr '\n' ' ')
  [ "$exported" = "$entry " ] || fail "$so exports '$exported', not only $entry"
  plugin_path=$plugin_path${plugin_path:+:}$work/$kind-build
done

# The core's loader (linked statically into hmc_plugin_check) finds them through HMC_PLUGIN_PATH.
unset HMC_PLUGIN_PATH HMC_DEVICE_PLUGINS HMC_NET_PLUGINS
HMC_PLUGIN_PATH=$plugin_path HMC_LOG_LEVEL=info \
  "$check" --no-default-dirs --exercise-net template device:template net:template

# The installed libhmc.so finds them in <prefix>/lib/hmc, with no variable set; a program built
# from the installed headers and library alone says so through the public API.
mkdir -p "$prefix/lib/hmc"
cp "$work/device-build/libhmc-device-template.so" "$work/net-build/libhmc-net-template.so" "$prefix/lib/hmc/"
quiet "$cc" -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$src/tests/plugin/installed_check.c" \
  -o "$work/installed_check" -L"$prefix/lib" -lhmc -Wl,-rpath,"$prefix/lib"
HMC_LOG_LEVEL=info "$work/installed_check" device:template net:template

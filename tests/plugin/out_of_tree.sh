#!/bin/sh
# The SDK as a vendor sees it. Installs this build into a temporary prefix, checks the package's
# contents, compiles the SDK's C++ helpers against it, builds the plugin templates (device, net
# in C, net in C++ on the SDK's adaptor; copied from the installed share/hmc/templates) against
# it with find_package(hmc-sdk), checks that each exports only its entry symbol, and runs the
# installed hmc-plugin-check on them (by file, and by name once they are installed beside the
# library).
#
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR CMAKE GENERATOR C_COMPILER CXX_COMPILER WITH_CHECKER
#   WITH_CHECKER: 1 when the build has hmc-plugin-check (HMC_BUILD_TOOLS), else 0
set -eu
usage="usage: $0 BUILD_DIR SOURCE_DIR CMAKE GENERATOR C_COMPILER CXX_COMPILER WITH_CHECKER"
[ $# -eq 7 ] || { echo "$usage" >&2; exit 2; }
build=$1 src=$2 cmake=$3 generator=$4 cc=$5 cxx=$6 with_checker=$7

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
         include/hmc/plugin/net.h include/hmc/plugin/log.hpp include/hmc/plugin/status.hpp \
         include/hmc/plugin/boundary.hpp include/hmc/plugin/config.hpp \
         include/hmc/plugin/net_adaptor.hpp \
         lib/cmake/hmc-sdk/hmc-sdk-config.cmake \
         lib/cmake/hmc-sdk/hmc-sdk-config-version.cmake lib/cmake/hmc-sdk/hmc-sdk-targets.cmake \
         lib/cmake/hmc-sdk/HmcPlugin.cmake share/hmc/plugin-contract.md \
         share/hmc/templates/device/CMakeLists.txt \
         share/hmc/templates/net/CMakeLists.txt share/hmc/templates/net-cpp/CMakeLists.txt; do
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

check=$prefix/bin/hmc-plugin-check
if [ "$with_checker" = 1 ]; then
  [ -x "$check" ] || fail "the installed package lacks bin/hmc-plugin-check"
fi

# The C++ helpers compile against the installed headers alone, and work.
quiet "$cxx" -std=c++17 -Wall -Wextra -Werror -I"$prefix/include" \
  "$src/tests/plugin/installed_helpers.cpp" -o "$work/installed_helpers"
quiet "$work/installed_helpers"

for kind in device net net-cpp; do
  cp -R "$prefix/share/hmc/templates/$kind" "$work/$kind"
  quiet "$cmake" -S "$work/$kind" -B "$work/$kind-build" -G "$generator" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  quiet "$cmake" --build "$work/$kind-build"
  case $kind in
    device) so=$work/device-build/libhmc-device-template.so entry=hmc_device_plugin_v1 ;;
    net) so=$work/net-build/libhmc-net-template.so entry=hmc_net_plugin_v2 ;;
    net-cpp) so=$work/net-cpp-build/libhmc-net-template_cpp.so entry=hmc_net_plugin_v2 ;;
  esac
  [ -f "$so" ] || fail "building the $kind template did not produce $so"
  exported=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort | tr '\n' ' ')
  [ "$exported" = "$entry " ] || fail "$so exports '$exported', not only $entry"
done

# The installed checker, as a vendor runs it on the files they built.
unset HMC_PLUGIN_PATH HMC_DEVICE_PLUGINS HMC_NET_PLUGINS
if [ "$with_checker" = 1 ]; then
  "$check" "$work/net-build/libhmc-net-template.so" "$work/device-build/libhmc-device-template.so" \
    "$work/net-cpp-build/libhmc-net-template_cpp.so" || fail "hmc-plugin-check failed the templates"
fi

# The installed libhmc.so finds them in <prefix>/lib/hmc, with no variable set; a program built
# from the installed headers and library alone says so through the public API.
mkdir -p "$prefix/lib/hmc"
cp "$work/device-build/libhmc-device-template.so" "$work/net-build/libhmc-net-template.so" "$prefix/lib/hmc/"
quiet "$cc" -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$src/tests/plugin/installed_check.c" \
  -o "$work/installed_check" -L"$prefix/lib" -lhmc -Wl,-rpath,"$prefix/lib"
HMC_LOG_LEVEL=info "$work/installed_check" device:template net:template
# ... and so does the installed checker, by name.
if [ "$with_checker" = 1 ]; then
  "$check" net:template device:template || fail "hmc-plugin-check net:template device:template failed"
fi

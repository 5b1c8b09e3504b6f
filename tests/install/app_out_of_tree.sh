#!/bin/sh
# hmc as an application sees it. Installs this build into a temporary prefix and moves the
# prefix elsewhere (the package must not depend on where it was installed), checks the
# package's files, then builds app/ against it twice, with find_package(hmc) and with
# pkg-config, and runs both: the version and plugin directory each build system reports must be
# the library's own, every loaded plugin must come from that directory, and a message must cross
# between two processes over loopback.
#
# usage: app_out_of_tree.sh BUILD_DIR SOURCE_DIR CMAKE GENERATOR C_COMPILER CXX_COMPILER
set -eu
[ $# -eq 6 ] || { echo "usage: $0 BUILD_DIR SOURCE_DIR CMAKE GENERATOR C_COMPILER CXX_COMPILER" >&2; exit 2; }
build=$1 src=$2 cmake=$3 generator=$4 cc=$5 cxx=$6

work=$(mktemp -d "${TMPDIR:-/tmp}/hmc-app.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
quiet() {
  log=$work/step.log
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$*"; }
}
# expect FILE TEXT: FILE has a line that is exactly TEXT.
expect() {
  grep -qxF -- "$2" "$1" || { cat "$1" >&2; fail "no line '$2' in $(basename "$1")"; }
}

"$cmake" --install "$build" --prefix "$work/staged" >"$work/install.log" 2>&1 || {
  cat "$work/install.log" >&2
  fail "cmake --install $build failed (this test installs the whole build: build all targets first)"
}
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
for f in lib/cmake/hmc/hmc-config.cmake lib/cmake/hmc/hmc-config-version.cmake \
         lib/cmake/hmc/hmc-targets.cmake lib/pkgconfig/hmc.pc include/hmc/hmc.h \
         include/hmc/hmc.hpp; do
  [ -f "$prefix/$f" ] || fail "the installed package lacks $f"
done
if grep -rl -e "$src" -e "$build" -e "$work/staged" "$prefix/lib/cmake/hmc" "$prefix/lib/pkgconfig" >&2; then
  fail "installed package files refer to the source, build or install tree"
fi

# Installed plugins only, as an application finds them by default; one transport, no calibration.
unset HMC_PLUGIN_PATH HMC_DEVICE_PLUGINS
export HMC_NET_PLUGINS=hoststage HMC_NET_CALIBRATE=0 HMC_DEVICE_COPY_CALIBRATE=0

# --- find_package(hmc) -----------------------------------------------------------------------
cp -R "$src/tests/install/app" "$work/app"
quiet "$cmake" -S "$work/app" -B "$work/app-build" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
quiet "$cmake" --build "$work/app-build"
package=$work/app-build/package.txt
version=$(sed -n 's/^version //p' "$package")
[ -n "$version" ] || fail "find_package(hmc) set no hmc_VERSION"
expect "$package" "HMC_VERSION $version"
expect "$package" "plugin_dir $prefix/lib/hmc"
"$work/app-build/hmc_app" "$prefix/lib/hmc" >"$work/cmake.out" 2>&1 || {
  cat "$work/cmake.out" >&2
  fail "hmc_app built with find_package(hmc) failed"
}
expect "$work/cmake.out" "version $version"
expect "$work/cmake.out" "plugin hoststage at $prefix/lib/hmc/libhmc-net-hoststage.so"
expect "$work/cmake.out" "device host"
expect "$work/cmake.out" "received 32 bytes: from an installed hmc"
"$work/app-build/hmc_app_cxx" >"$work/cxx.out" 2>&1 || { cat "$work/cxx.out" >&2; fail "hmc_app_cxx failed"; }
grep -q "^cxx version $version, [1-9][0-9]* devices$" "$work/cxx.out" ||
  { cat "$work/cxx.out" >&2; fail "hmc_app_cxx printed something else"; }

# --- pkg-config ------------------------------------------------------------------------------
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pc() { pkg-config "$@" hmc || fail "pkg-config $* hmc"; }
[ "$(pc --modversion)" = "$version" ] || fail "pkg-config --modversion hmc is $(pc --modversion), not $version"
# ${pcfiledir}-relative: PREFIX/lib/pkgconfig/../../lib; the same directories once resolved.
libdir=$(cd "$(pc --variable=libdir)" && pwd)
plugindir=$(cd "$(pc --variable=plugindir)" && pwd)
[ "$plugindir" = "$prefix/lib/hmc" ] || fail "pkg-config's plugindir is $plugindir, not $prefix/lib/hmc"
[ -f "$libdir/libhmc.so" ] || fail "pkg-config's libdir $libdir has no libhmc.so"
[ -f "$plugindir/libhmc-net-hoststage.so" ] || fail "pkg-config's plugindir $plugindir has no hoststage plugin"
# shellcheck disable=SC2046
quiet "$cc" -std=c11 -Wall -Wextra -Werror $(pc --cflags) "$src/tests/install/app/hmc_app.c" \
  -o "$work/hmc_app_pc" $(pc --libs) -Wl,-rpath,"$libdir"
"$work/hmc_app_pc" "$plugindir" >"$work/pc.out" 2>&1 || { cat "$work/pc.out" >&2; fail "hmc_app built with pkg-config failed"; }
expect "$work/pc.out" "version $version"
expect "$work/pc.out" "received 32 bytes: from an installed hmc"
# The tools' programs: nccl-tests' names link to hmc's, xfer-list-bench is installed.
for name in all_reduce all_gather alltoall reduce_scatter broadcast; do
  [ -x "$build/bin/hmc_${name}_perf" ] || continue  # built where CLI11 is
  [ -x "$prefix/bin/hmc_${name}_perf" ] || fail "bin/hmc_${name}_perf is not installed"
  link=$prefix/libexec/hmc/nccl-tests/${name}_perf
  [ -L "$link" ] && [ -x "$link" ] || fail "libexec/hmc/nccl-tests/${name}_perf is not a link to a program"
  "$link" --version | grep -qxF "hmc_${name}_perf (hmc) $version" || fail "${name}_perf --version"
done
"$prefix/bin/xfer-list-bench" --help | grep -q '^usage: xfer-list-bench' || fail "bin/xfer-list-bench --help"
# Every installed program answers --help (a usage text, exit status 0) and --version (its name
# and the library's version, exit status 0), the same way.
tools=0
for tool in "$prefix"/bin/*; do
  name=$(basename "$tool")
  "$tool" --help >"$work/help.out" 2>&1 || { cat "$work/help.out" >&2; fail "$name --help exited non-zero"; }
  grep -qi '^usage' "$work/help.out" || { cat "$work/help.out" >&2; fail "$name --help printed no usage"; }
  out=$("$tool" --version) || fail "$name --version exited non-zero"
  [ "$out" = "$name (hmc) $version" ] || fail "$name --version printed '$out', not '$name (hmc) $version'"
  tools=$((tools + 1))
done
[ "$tools" -ge 7 ] || fail "only $tools programs installed in bin/"
echo "ok: hmc $version, find_package(hmc) and pkg-config, prefix moved after install"

#!/bin/sh
# The Debian packages (scripts/hmc-debs): built from the build tree, one per plugin; each
# holds what it should and depends on installed Debian packages and on libhmc0 of its version;
# dpkg installs them all into an empty root (its own database, --root), and from that root,
# with no HMC_PLUGIN_PATH and nothing of the build tree, hmc-info finds every plugin where the
# packages put them, hmc-perf moves data over loopback, and python3 imports hmc and transfers.
#
#   debs_check.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmc-debs-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "debs_check: $*" >&2; exit 1; }
unset HMC_PLUGIN_PATH PYTHONPATH LD_LIBRARY_PATH
"$src/scripts/hmc-debs" "$build" "$tmp/debs" > "$tmp/made"
cd "$tmp/debs"
v=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
for p in libhmc0 libhmc-dev hmc-tools python3-hmc hmc-plugin-net-hoststage; do
  [ -f "${p}_${v}_"*.deb ] || fail "no package $p"
done
# One package per plugin the build made, holding that plugin only.
for so in "$build"/lib/hmc/libhmc-*.so; do
  n=$(basename "$so" .so); n=${n#libhmc-}
  deb=$(ls "hmc-plugin-${n}_${v}_"*.deb) || fail "no package for the plugin $n"
  files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $NF}')
  [ "$files" = "./usr/lib/hmc/libhmc-$n.so" ] || fail "$deb holds: $files"
  dpkg-deb -f "$deb" Depends | grep -q "libhmc0 (= $v)" || fail "$deb does not depend on libhmc0 (= $v)"
done
dpkg-deb -f hmc-plugin-net-ucx_*.deb Depends 2>/dev/null | grep -q libucx0 || [ ! -f hmc-plugin-net-ucx_*.deb ] ||
  fail "net-ucx does not depend on libucx0"
dpkg-deb -f hmc-plugin-net-ofi_*.deb Depends 2>/dev/null | grep -q libfabric1 || [ ! -f hmc-plugin-net-ofi_*.deb ] ||
  fail "net-ofi does not depend on libfabric1"
dev=$(dpkg-deb -c libhmc-dev_*.deb)
echo "$dev" | grep -q './usr/lib/cmake/hmc/hmc-config.cmake' || fail "libhmc-dev lacks find_package(hmc)"
echo "$dev" | grep -q './usr/lib/pkgconfig/hmc.pc' || fail "libhmc-dev lacks hmc.pc"
echo "$dev" | grep -q './usr/include/hmc/plugin/net.h' || fail "libhmc-dev lacks the SDK"
# Every dependency is a Debian package (installed here, where it was built).
for deb in *.deb; do
  dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/^ *//; s/ .*//' | while read -r dep; do
    [ -z "$dep" ] && continue
    case $dep in libhmc0|python3) continue ;; esac
    dpkg-query -W "$dep" >/dev/null 2>&1 || ls "$dep"_*.deb >/dev/null 2>&1 || fail "$deb depends on $dep, which is no package here"
  done
done

# dpkg into an empty root with its own database (the system's libraries are not in it: their
# dependencies are forced, the packages' own among each other are checked).
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: > "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-not-root --force-script-chrootless --force-depends \
  --log=/dev/null -i ./*.deb > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log" >&2; fail "dpkg -i --root failed"; }
n=$(dpkg --root="$root" -l 'hmc*' 'libhmc*' 'python3-hmc' 2>/dev/null | grep -c '^ii') || true
[ "$n" = "$(ls ./*.deb | wc -l)" ] || fail "dpkg lists $n packages installed, not $(ls ./*.deb | wc -l)"

cd "$tmp"
"$root/usr/bin/hmc-info" --require hoststage > info.txt || { cat info.txt >&2; fail "hmc-info from the packages"; }
grep -q "loaded  net    hoststage .* $root/usr/lib/hmc/libhmc-net-hoststage.so" info.txt ||
  { cat info.txt >&2; fail "hmc-info did not load hoststage from the packages' tree"; }
HMC_NET_PLUGINS=hoststage HMC_NET_CALIBRATE=0 timeout 60 "$root/usr/bin/hmc-perf" --loopback --size 64K \
  --iters 200 --check --format json > perf.json || fail "hmc-perf --loopback from the packages"
grep -q '"size":65536' perf.json || fail "hmc-perf printed: $(cat perf.json)"
PYTHONPATH=$root/usr/lib/python3/dist-packages HMC_NET_PLUGINS=hoststage timeout 60 /usr/bin/python3 -c '
import sys, numpy as np, hmc
from concurrent.futures import ThreadPoolExecutor
assert hmc.__file__.startswith(sys.argv[1]), hmc.__file__
a, b = hmc.Context(), hmc.Context()
with ThreadPoolExecutor(1) as pool:
    f = pool.submit(b.accept, 10000)
    pa = a.connect(b.address(), 10000)
    pb = f.result()
got = np.zeros(4096, dtype=np.uint8)
r = pb.recv(got, tag=1)
pa.send(np.arange(4096, dtype=np.uint8), tag=1).wait(10000)
r.wait(10000)
assert (got == np.arange(4096, dtype=np.uint8)).all()
a.close(); b.close()
print("debs_check: python3-hmc transferred 4 KiB")
' "$root/usr/lib/python3/dist-packages" || fail "python3-hmc from the packages"
echo "debs_check: ok ($(ls "$tmp/debs" | wc -l) packages)"

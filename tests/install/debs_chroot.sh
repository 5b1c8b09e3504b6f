#!/bin/sh
# The Debian packages in a fresh Debian 12 chroot, as a user installs them: debootstrap
# (minbase, from Debian's archive; kept in CHROOT_DIR and reused), then apt-get install ./*.deb
# inside it, which fetches their dependencies from the archive, then hmc-info and a loopback
# transfer with hmc-perf there. Needs root, debootstrap and Debian's archive; minutes the first
# time (CMake option HMC_TEST_DEB_CHROOT registers it as packages_deb_chroot).
#
#   debs_chroot.sh SOURCE_DIR BUILD_DIR CHROOT_DIR [MIRROR]
set -eu
src=$1 build=$2 root=$3 mirror=${4:-http://deb.debian.org/debian}
fail() { echo "debs_chroot: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (chroot)"
command -v debootstrap >/dev/null || fail "needs debootstrap (Debian: debootstrap)"
if [ ! -x "$root/usr/bin/apt-get" ]; then
  rm -rf "$root"
  timeout 1200 debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; fail "debootstrap failed"; }
fi
rm -rf "$root/tmp/debs"
mkdir -p "$root/tmp/debs"
"$src/scripts/hmc-debs" "$build" "$root/tmp/debs" >/dev/null
mounted=""
cleanup() { for m in $mounted; do umount "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
mount -t proc proc "$root/proc" && mounted="$root/proc"
mount -t sysfs sysfs "$root/sys" && mounted="$root/sys $mounted"  # UCX reads /sys/class/net
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
chroot "$root" sh -c 'dpkg --purge $(dpkg-query -W -f "\${Package}\n" "hmc*" "libhmc*" python3-hmc 2>/dev/null) >/dev/null 2>&1; true'
chroot "$root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends /tmp/debs/*.deb' \
  > "$root.install.log" 2>&1 || { tail -30 "$root.install.log" >&2; fail "apt-get install ./*.deb failed"; }
chroot "$root" hmc-info --require hoststage,ucx,ofi > "$root.info" 2>&1 || { cat "$root.info" >&2; fail "hmc-info in the chroot"; }
grep -q "loaded  net    hoststage .*/usr/lib/hmc/libhmc-net-hoststage.so" "$root.info" || fail "hoststage not loaded from /usr/lib/hmc"
chroot "$root" env HMC_NET_PLUGINS=hoststage HMC_NET_CALIBRATE=0 timeout 60 hmc-perf --loopback --size 64K --iters 200 --check --format json > "$root.perf" ||
  fail "hmc-perf --loopback in the chroot"
grep -q '"size":65536' "$root.perf" || fail "hmc-perf said: $(cat "$root.perf")"
chroot "$root" python3 -c 'import hmc, numpy; print("python3-hmc", hmc.__file__)' || fail "import hmc in the chroot"
echo "debs_chroot: ok: $(ls "$root"/tmp/debs | wc -l) packages installed with apt-get in a Debian 12 chroot"

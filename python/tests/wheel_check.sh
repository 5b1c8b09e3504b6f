#!/bin/sh
# The wheel: builds it from python/ with pip (the project's CMake through setup.py, no network:
# --no-build-isolation --no-index), installs it into a fresh virtual environment
# (--system-site-packages, for Debian's numpy), and runs two processes of that environment's
# python that import hmc and move 1 MiB between them over the plugins the wheel carries
# (HMC_PLUGIN_PATH unset, nothing of the build tree on the path).
#
#   wheel_check.sh SOURCE_DIR WORK_DIR PYTHON
#     WORK_DIR keeps the CMake build of the wheel between runs (a second run is incremental)
set -eu
src=$1 work=$2 python=$3
mkdir -p "$work"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmc-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset HMC_PLUGIN_PATH PYTHONPATH
PYHMC_BUILD_DIR=$work/cmake "$python" -m pip wheel --no-build-isolation --no-index --no-deps \
  -q -w "$tmp/dist" "$src/python"
whl=$(ls "$tmp"/dist/hmc-*.whl)
echo "wheel_check: built $(basename "$whl")"
"$python" -m zipfile -l "$whl" > "$tmp/list"
for f in hmc/__init__.py hmc/_lib/libhmc.so.0 hmc/_lib/hmc/libhmc-net-hoststage.so; do
  grep -q " *$f " "$tmp/list" || grep -q "^$f" "$tmp/list" || { echo "wheel_check: $f missing in the wheel" >&2; cat "$tmp/list" >&2; exit 1; }
done
grep -q '_hmc\..*\.so' "$tmp/list" || { echo "wheel_check: no extension in the wheel" >&2; exit 1; }

"$python" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --no-index --no-deps "$whl"
cd "$tmp"
cat > pair.py <<'PY'
import subprocess, sys
import numpy as np
import hmc

assert hmc.__file__.startswith(sys.prefix), f"hmc imported from {hmc.__file__}, not the venv"
if len(sys.argv) > 1:  # the sender
    ctx = hmc.Context()
    peer = ctx.connect(bytes.fromhex(sys.argv[1]), 10000)
    peer.send(np.arange(1 << 20, dtype=np.uint8) * 3, tag=1).wait(10000)
    peer.recv(np.zeros(1, dtype=np.uint8), tag=2).wait(10000)  # the receiver's go-ahead
    ctx.close()
    sys.exit(0)
ctx = hmc.Context()
child = subprocess.Popen([sys.executable, __file__, ctx.address().hex()])
peer = ctx.accept(10000)
buf = np.zeros(1 << 20, dtype=np.uint8)
peer.recv(buf, tag=1).wait(10000)
peer.send(np.ones(1, dtype=np.uint8), tag=2).wait(10000)
assert child.wait(20) == 0
assert (buf == (np.arange(1 << 20, dtype=np.uint8) * 3)).all(), "the 1 MiB arrived changed"
print("wheel_check: 1 MiB between two processes of the venv, hmc", hmc.__file__)
ctx.close()
PY
timeout 60 "$tmp/venv/bin/python" pair.py

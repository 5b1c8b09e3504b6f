#!/bin/sh
# nccl-tests' command lines on hmc (docs/tools.md#nccl-tests-command-lines): runs PROGRAM with 2
# local ranks on loopback (--np 2, and under mpirun where MPIRUN names one) and reads its output
# as nccl-tests' parsers do: the column header, one row of 13 columns per size with the sizes
# asked for, #wrong 0 in both forms, busbw = algbw x FACTOR, and the summary lines (no value out
# of bounds; the average bus bandwidth the mean of the rows'). Then the refusals: values hmc
# cannot honour are usage errors (exit status 2) that say why.
#
# usage: nccl_tests_output.sh PROGRAM REDOP ROOT FACTOR [MPIRUN]
#   REDOP/ROOT: what the rows' redop and root columns must say; FACTOR: busbw / algbw on 2 ranks
set -eu
[ $# -ge 4 ] || { echo "usage: $0 PROGRAM REDOP ROOT FACTOR [MPIRUN]" >&2; exit 2; }
prog=$1 redop=$2 root=$3 factor=$4 mpirun=${5:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/hmc-nccl-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# parse OUT: every check on one run's output, sizes 8 to 1K by 4 (8 32 128 512).
parse() {
  out=$1
  grep -Eq '^# +size +count +type +redop +root +time +algbw +busbw +#wrong +time +algbw +busbw +#wrong$' "$out" ||
    fail "no nccl-tests column header"
  grep -q '^# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 4(factor) warmup iters: 1 iters: 3 agg iters: 1 validation: 1 graph: 0$' "$out" ||
    fail "no nccl-tests parameter line"
  [ "$(grep -c '^#  Rank ' "$out")" = 2 ] || fail "not one '#  Rank' line per rank"
  grep -qx '# Out of bounds values : 0 OK' "$out" || fail "no '# Out of bounds values : 0 OK'"
  avg=$(sed -n 's/^# Avg bus bandwidth    : \([0-9.e+-]*\) *$/\1/p' "$out")
  [ -n "$avg" ] || fail "no '# Avg bus bandwidth    : X' line"
  awk -v redop="$redop" -v root="$root" -v factor="$factor" -v avg="$avg" '
    function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
    function bad(why) { print "FAIL: row " NR ": " why ": " $0 > "/dev/stderr"; failed = 1; exit 1 }
    /^#/ || NF == 0 { next }
    {
      if (NF != 13) bad("not 13 columns")
      want = rows == 0 ? 8 : last * 4
      if ($1 != want) bad("size " $1 ", expected " want)
      last = $1
      if ($2 != $1 / 4 && $2 != $1 / 8) bad("count " $2 " is not size / 4 (or per rank, size / 8)")
      if ($3 != "float" || $4 != redop || $5 != root) bad("type/redop/root")
      for (i = 6; i <= 13; ++i) if (!num($i)) bad("column " i " is not a number")
      if ($9 != 0 || $13 != 0) bad("#wrong is not 0")
      for (i = 7; i <= 11; i += 4)
        if ($(i + 1) - $i * factor > 0.02 || $i * factor - $(i + 1) > 0.02) bad("busbw is not algbw x " factor)
      sum += $8 + $12; rows++
    }
    END {
      if (failed) exit 1
      if (rows != 4) { print "FAIL: " rows " rows, expected 4 (8 32 128 512)" > "/dev/stderr"; exit 1 }
      mean = sum / (2 * rows)
      if (avg - mean > 0.01 || mean - avg > 0.01) { print "FAIL: Avg bus bandwidth " avg " is not the rows mean " mean > "/dev/stderr"; exit 1 }
    }' "$out" || { cat "$out" >&2; exit 1; }
}

args="-b 8 -e 1K -f 4 -g 1 -c 1 -n 3 -w 1 -o sum -d float -z 0"
[ "$root" = -1 ] || args="$args -r $root"
# shellcheck disable=SC2086
timeout 120 "$prog" $args --np 2 >"$work/np.out" 2>"$work/np.err" ||
  { cat "$work/np.out" "$work/np.err" >&2; fail "$prog --np 2 failed"; }
parse "$work/np.out"
# The long forms and --opt=value, as nccl-tests' getopt_long takes them.
rootarg=$root
[ "$root" = -1 ] && rootarg=0
timeout 120 "$prog" --minbytes=8 --maxbytes 1K --stepfactor=4 --ngpus 1 --check=1 --iters 3 \
  --warmup_iters=1 --op sum --datatype=float --blocking 0 --root="$rootarg" --np 2 \
  >"$work/long.out" 2>"$work/long.err" || { cat "$work/long.out" "$work/long.err" >&2; fail "long options"; }
parse "$work/long.out"

# Under Open MPI's launcher: ranks from OMPI_COMM_WORLD_*, HMC_RANK=-1 (its documented default:
# the launcher's) set explicitly, the rendezvous passed with -x.
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
  # A free port below the ephemeral range: mpirun's daemons listen on ephemeral ports, and one
  # taken from that range could be theirs by the time rank 0 binds it.
  port=$(python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for p in random.sample(range(max(1024, low - 8192), low), 64):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()
')
  asroot=""
  [ "$(id -u)" = 0 ] && asroot=--allow-run-as-root
  # shellcheck disable=SC2086
  HMC_RANK=-1 HMC_RENDEZVOUS=tcp://127.0.0.1:$port timeout 120 "$mpirun" $asroot --oversubscribe \
    --mca btl self,vader -np 2 -x HMC_RANK -x HMC_RENDEZVOUS -x HMC_PLUGIN_PATH -x HMC_NET_PLUGINS \
    -x HMC_DEVICE_PLUGINS -x HMC_NET_CALIBRATE "$prog" $args >"$work/mpi.out" 2>"$work/mpi.err" ||
    { cat "$work/mpi.out" "$work/mpi.err" >&2; fail "$prog under $mpirun failed"; }
  parse "$work/mpi.out"
  echo "ok under $mpirun"
fi

# Refusals: exit status 2 and the reason.
refused() {
  want=$1
  shift
  rc=0
  "$prog" "$@" >"$work/r.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$work/r.out" >&2; fail "$prog $* exited $rc, expected 2"; }
  grep -q -- "$want" "$work/r.out" || { cat "$work/r.out" >&2; fail "$prog $*: no '$want'"; }
}
refused "hmc runs one rank per process" -t 2
refused "hmc runs one rank per process" -g 2
refused "hmc reduces with sum, prod, min, max, avg" -o mulsum
refused "hmc's datatypes are" -d uint64
refused "no CSV file is written" -F out.csv
refused "is larger than -e" -b 1M -e 1K
"$prog" --version | grep -q '^hmc_[a-z_]*_perf (hmc) [0-9]' || fail "$prog --version"
echo "ok: $prog"

"""Fixtures of the Python tests: a connected pair of contexts in this process, a second Python
process (peer_process.py) to connect to, and groups of rank processes."""

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import hmc

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def pair():
    """Two contexts of this process, connected: (initiator peer, target peer, initiator context,
    target context)."""
    a, b = hmc.Context(), hmc.Context()
    with ThreadPoolExecutor(1) as pool:
        accepted = pool.submit(b.accept, 10000)
        pa = a.connect(b.address(), 10000)
        pb = accepted.result()
    yield pa, pb, a, b
    a.close()
    b.close()


class PeerProcess:
    """peer_process.py in MODE, with its context's address read from its first line."""

    def __init__(self, mode, *args):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "peer_process.py"), mode, *map(str, args)],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("address "), f"peer_process.py {mode} said {line!r}"
        self.address = bytes.fromhex(line.split()[1])

    def line(self):
        """The next line it prints (what it saw), without the newline."""
        return self.proc.stdout.readline().rstrip("\n")

    def finish(self, timeout=20):
        """Its exit status, once it ended."""
        rc = self.proc.wait(timeout)
        self.proc.stdout.close()
        return rc

    def kill(self):
        self.proc.kill()
        self.finish()


@pytest.fixture
def spawn():
    started = []

    def start(mode, *args):
        p = PeerProcess(mode, *args)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.proc.poll() is None:
            p.kill()


def free_port():
    """A TCP port of 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(argv, ranks, rank_env, timeout=120):
    """Runs `ranks` processes of argv, rank r with rank_env(r) added to the environment, and
    checks that each exits 0 printing "rank r ok"; the others are killed when one hangs.
    Returns each rank's output (stdout and stderr)."""
    procs = [subprocess.Popen(argv, env=dict(os.environ, **rank_env(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in range(ranks)]
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"a rank did not finish within {timeout} s")
        results.append((p.returncode, out))
    for r, (code, out) in enumerate(results):
        assert code == 0, f"rank {r} failed:\n{out}"
        assert f"rank {r} ok" in out
    return [out for _, out in results]

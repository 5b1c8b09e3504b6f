"""torch.distributed's backend "hmc" (hmc.torch) with 2 and 4 processes, as torchrun starts
them: torch's env:// rendezvous and TCPStore, then send/recv, broadcast, all_reduce,
all_gather, reduce_scatter, all_to_all, all_to_all_single and barrier checked in torch_rank.py."""

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("ranks", [2, 4])
def test_backend_under_torchrun_variables(ranks):
    port = free_port()
    procs = []
    for r in range(ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "torch_rank.py")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank did not finish within 120 s")
        results.append((p.returncode, out))
    for r, (code, out) in enumerate(results):
        assert code == 0, f"rank {r} failed:\n{out}"
        assert f"rank {r} ok" in out

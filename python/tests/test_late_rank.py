"""A collective that timed out, whose tensor the application then drops (torch.distributed's
backend "hmc"): the request is cancelled, so nothing writes into the freed memory, later calls
fail with a clear error, and both ranks exit (late_rank.py)."""

import os
import sys

import pytest

from conftest import free_port, run_ranks

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))


def test_timed_out_collective_then_more_calls():
    port = free_port()
    run_ranks([sys.executable, os.path.join(HERE, "late_rank.py")], 2,
              lambda r: {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                         "HMC_TIMEOUT_MS": "2000"}, timeout=60)

"""torch.distributed's backend "hmc" (hmc.torch) with 2 and 4 processes, as torchrun starts
them: torch's env:// rendezvous and TCPStore, then every ProcessGroup operation gloo has (on
every dtype for data movement, gloo's dtypes and ops for reductions), recv from any source,
subgroups and the Work's methods, checked in torch_rank.py."""

import os
import sys

import pytest

from conftest import free_port, run_ranks

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("ranks", [2, 4])
def test_backend_under_torchrun_variables(ranks):
    port = free_port()
    run_ranks([sys.executable, os.path.join(HERE, "torch_rank.py")], ranks,
              lambda r: {"RANK": str(r), "WORLD_SIZE": str(ranks), "LOCAL_RANK": str(r),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})

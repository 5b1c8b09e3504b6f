"""torch.distributed's backend "hmc" (hmc.torch) with 2 and 4 processes, as torchrun starts
them: torch's env:// rendezvous and TCPStore, then every ProcessGroup operation gloo has (on
every dtype for data movement, gloo's dtypes and ops for reductions), recv from any source,
subgroups and the Work's methods, checked in torch_rank.py; DistributedDataParallel against
gloo (torch_ddp_rank.py); the group's timeout (torch_timeout_rank.py)."""

import os
import sys

import pytest

from conftest import free_port, run_ranks

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))


def torchrun(script, ranks, **extra):
    port = free_port()
    return run_ranks([sys.executable, os.path.join(HERE, script)], ranks,
              lambda r: {"RANK": str(r), "WORLD_SIZE": str(ranks), "LOCAL_RANK": str(r),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **extra})


@pytest.mark.parametrize("ranks", [2, 4])
def test_backend_under_torchrun_variables(ranks):
    outs = torchrun("torch_rank.py", ranks)
    # The last rank outlives the others by a second (torch_rank.py): it hears them leave, at
    # info level, rather than warn that they were lost.
    lost = [line for line in outs[-1].splitlines() if "WARN" in line and "lost" in line]
    assert not lost, "\n".join(lost)


@pytest.mark.parametrize("ranks", [2, 4])
def test_ddp_matches_gloo(ranks):
    torchrun("torch_ddp_rank.py", ranks)


# HMC_TIMEOUT_MS far above the group's 3 s, and below it (with heartbeats well within it, which
# keep a silent peer alive): either way the group's timeout is what ends a wait.
@pytest.mark.parametrize("hmc_timeout", [{"HMC_TIMEOUT_MS": "60000"},
                                         {"HMC_TIMEOUT_MS": "1000", "HMC_HEARTBEAT_MS": "200"}])
def test_group_timeout_bounds_operations_then_the_group_refuses_calls(hmc_timeout):
    torchrun("torch_timeout_rank.py", 2, **hmc_timeout)

"""torch's own distributed test suite (torch/testing/_internal/distributed/distributed_test.py,
the one torch runs against gloo, NCCL, MPI and UCC) against one backend, ranks spawned by the
suite itself as torch's test_distributed_spawn.py does.

    BACKEND=hmc|gloo WORLD_SIZE=2 python3 run_suite.py [unittest arguments, e.g. -k test_reduce]

BACKEND "hmc" is registered as a plugin backend (import hmc.torch here, which the spawned ranks
repeat when they import this module). The expecttest stand-in beside this file is put on
sys.path first. Prints unittest's summary; exits non-zero when a test fails."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("BACKEND", "hmc")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="hmc-torch-suite-")

# torch's test utilities write JUnit XML through xmlrunner (not in Debian) whenever CI is set.
os.environ.pop("CI", None)

import torch.distributed as dist  # noqa: E402

if os.environ["BACKEND"] == "hmc":
    import hmc.torch  # noqa: E402,F401  registers the backend
    from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

    DistTestCases.backend_feature["plugin"].add("hmc")
    # The features the suite gates by backend and hmc has as gloo has them on CPU tensors.
    DistTestCases.backend_feature["ddp"].add("hmc")
    DistTestCases.backend_feature["gpu"].add("hmc")  # the object collectives' tests

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    if not dist.is_available():
        sys.exit("torch.distributed is not available")
    run_tests()

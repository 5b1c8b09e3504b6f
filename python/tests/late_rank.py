"""One rank of test_late_rank.py: rank 1 comes to an all_reduce late; rank 0's times out, and
rank 0 drops the tensor and allocates afresh while rank 1's data is still on its way. Nothing
may land in the new tensors (the group keeps a timed-out operation's tensors alive, so their
memory is not reused under it), later calls must end at once (refused with a message), no call
may crash, and both ranks must exit on their own."""
import datetime
import gc
import os
import time

import torch
import torch.distributed as dist

import hmc.torch  # noqa: F401

r = int(os.environ["RANK"])
dist.init_process_group("hmc", timeout=datetime.timedelta(seconds=4))
dist.barrier()  # every pair connected
n = 1 << 18
if r == 1:
    time.sleep(8)  # after rank 0's wait has timed out, whether HMC_TIMEOUT_MS or the group's
    try:  # rank 0 gave up: matched by its timed-out all_reduce, or refused; never a hang
        dist.all_reduce(torch.ones(n))
        print("rank 1 late all_reduce: matched")
    except Exception as e:  # noqa: BLE001
        print("rank 1 late all_reduce:", type(e).__name__, e)
    print("rank 1 ok")
    raise SystemExit(0)

start = time.monotonic()
t = torch.full((n,), 2.0)
try:
    dist.all_reduce(t)
    raise SystemExit("rank 0: the all_reduce ended before the late rank came")
except (TimeoutError, RuntimeError) as e:  # hmc.TimeoutError, or the backend's RuntimeError
    print("rank 0 timed out:", e)
del t
gc.collect()
# Memory freed now would be taken again at once: rank 1's data, sent meanwhile, must not land
# in what the application allocates next.
fresh = [torch.full((n,), 7.0) for _ in range(4)]
time.sleep(max(0.0, 9.5 - (time.monotonic() - start)))  # rank 1 has sent by then
assert all(bool((f == 7.0).all()) for f in fresh), "the timed-out all_reduce wrote into freed memory"
for i in range(3):
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        raise SystemExit("rank 0: a collective after the timeout succeeded without its peer")
    except SystemExit:
        raise
    except Exception as e:
        assert str(e), "an error without a message"
        print("rank 0 later call refused:", type(e).__name__, str(e)[:160])
    assert time.monotonic() - t0 < 1.0, "a later call waited instead of being refused"
print("rank 0 ok")

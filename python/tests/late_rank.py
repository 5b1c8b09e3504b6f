"""One rank of test_late_rank.py: rank 1 comes to an all_reduce late; rank 0's times out, and
rank 0 takes the tensor's memory back (writes its own values into it) while rank 1's data is
still on its way. Nothing of the timed-out all_reduce may land there, later calls must end at
once (done or refused with a message), no call may crash, and both ranks must exit."""
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
    try:
        dist.all_reduce(torch.ones(n))
        raise SystemExit("rank 1: the late all_reduce succeeded against a rank that gave up")
    except SystemExit:
        raise
    except Exception as e:  # the other rank gave up: a clear error, not a hang
        print("rank 1 late all_reduce:", type(e).__name__, e)
    print("rank 1 ok")
    raise SystemExit(0)

start = time.monotonic()
# The tensor is a slice of a block that stays allocated, so that a late write lands in mapped
# memory (where it would corrupt the heap in an application) and shows here.
block = torch.zeros(3 * n)
t = block[n:2 * n]
t.fill_(2.0)
try:
    dist.all_reduce(t)
    raise SystemExit("rank 0: the all_reduce ended before the late rank came")
except (TimeoutError, RuntimeError) as e:  # hmc.TimeoutError, or torch-style
    print("rank 0 timed out:", e)
del t
gc.collect()
block.fill_(7.0)  # the application's own values now
time.sleep(max(0.0, 9.5 - (time.monotonic() - start)))  # rank 1 has sent by then
assert bool((block == 7.0).all()), "the timed-out all_reduce wrote into the tensor afterwards"
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

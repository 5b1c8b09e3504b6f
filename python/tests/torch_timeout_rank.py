"""One rank of test_torch.py's timeout test (2 ranks, group timeout 2 s). Rank 0 checks: a
monitored_barrier that rank 1 skips names rank 1 and breaks that group only; a
Work.wait with a shorter timeout raises GroupTimeoutError and leaves the group usable (the
operation ends once rank 1 joins it); an operation rank 1 never joins raises GroupTimeoutError
(a RuntimeError naming the operation and rank 1) after the group's timeout, not HMC_TIMEOUT_MS;
every later call raises GroupBrokenError. Rank 1 follows rank 0's cues through the c10d store."""
import datetime
import os
import time

import torch, torch.distributed as dist
import hmc.torch as ht

dist.init_process_group("hmc", timeout=datetime.timedelta(seconds=2))
r = dist.get_rank()
store = dist.distributed_c10d._get_default_store()
# A second group, whose monitored_barrier rank 1 skips: rank 0 names it, this group only breaks.
side = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=5))
if r == 0:
    t0 = time.monotonic()
    try:
        side.monitored_barrier(datetime.timedelta(milliseconds=500), wait_all_ranks=True)
        raise SystemExit("monitored_barrier passed without rank 1")
    except ht.GroupTimeoutError as e:
        assert "rank 1 did not reach it within 500 ms" in str(e), e
        assert time.monotonic() - t0 < 3, time.monotonic() - t0
    try:
        side.barrier()
        raise SystemExit("the broken side group accepted a barrier")
    except ht.GroupBrokenError:
        pass
    w = dist.all_reduce(torch.ones(3), async_op=True)
    t0 = time.monotonic()
    try:
        w.wait(datetime.timedelta(milliseconds=300))
        raise SystemExit("a wait of 300 ms for an operation rank 1 had not joined returned")
    except ht.GroupTimeoutError as e:
        assert 0.25 < time.monotonic() - t0 < 1.5, time.monotonic() - t0
        assert "all_reduce" in str(e) and "rank 1" in str(e), e
    assert not w.is_completed() and w.exception() is None
    store.set("join", "1")
    assert w.wait() and torch.equal(w.result()[0], torch.full((3,), 2.0)), w.result()
    # Rank 1 never joins this one: the group's timeout ends it.
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(3))
        raise SystemExit("an all_reduce rank 1 never joined returned")
    except RuntimeError as e:
        took = time.monotonic() - t0
        assert isinstance(e, ht.GroupTimeoutError), repr(e)
        assert 1.9 < took < 4.0, took
        assert "all_reduce" in str(e) and "rank 1" in str(e) and "2000 ms" in str(e), e
    for call in (lambda: dist.barrier(), lambda: dist.broadcast(torch.ones(1), 0),
                 lambda: dist.send(torch.ones(1), 1)):
        try:
            call()
            raise SystemExit("a broken group accepted a call")
        except ht.GroupBrokenError as e:
            assert "unusable" in str(e) and "all_reduce" in str(e), e
    store.set("done", "1")
    store.wait(["bye"], datetime.timedelta(seconds=30))  # rank 0 hosts the store: last out
else:
    store.wait(["join"], datetime.timedelta(seconds=30))
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), 2.0)), x
    store.wait(["done"], datetime.timedelta(seconds=30))
    store.set("bye", "1")
print("rank", r, "ok", flush=True)
# The timed-out all_reduce of rank 0 is still posted (collectives cannot be cancelled).
os._exit(0)

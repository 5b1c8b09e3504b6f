"""One rank of test_torch.py's timeout test (2 ranks). The default group has torch's timeout;
a group of both ranks made with a 3 s timeout, which rank 1 joins 1.5 s late (its connection
set-up is bounded by the group's timeout, not HMC_TIMEOUT_MS, which the test sets both above
and below it). Rank 0 checks on that group: a monitored_barrier rank 1 skips names rank 1 (on
a third group, which it breaks); a Work.wait with a shorter timeout raises GroupTimeoutError and
leaves the group usable (the operation ends once rank 1 joins it); an operation rank 1 never
joins raises GroupTimeoutError (a RuntimeError naming the operation and rank 1) after the
group's 3 s; every later call on the group raises GroupBrokenError, and the default group still
works. Rank 1 follows rank 0's cues through the c10d store."""
import datetime
import time

import torch, torch.distributed as dist
import hmc.torch as ht

dist.init_process_group("hmc")
r = dist.get_rank()
store = dist.distributed_c10d._get_default_store()
side = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=5))
if r == 1:
    time.sleep(1.5)
t0 = time.monotonic()
tg = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=3))
if r == 0:
    assert 1.0 < time.monotonic() - t0 < 3.0, time.monotonic() - t0  # waited for rank 1
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
    w = dist.all_reduce(torch.ones(3), async_op=True, group=tg)
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
        dist.all_reduce(torch.ones(3), group=tg)
        raise SystemExit("an all_reduce rank 1 never joined returned")
    except RuntimeError as e:
        took = time.monotonic() - t0
        assert isinstance(e, ht.GroupTimeoutError), repr(e)
        assert 2.9 < took < 5.0, took
        assert "all_reduce" in str(e) and "rank 1" in str(e) and "3000 ms" in str(e), e
    for call in (lambda: dist.barrier(group=tg), lambda: dist.broadcast(torch.ones(1), 0, group=tg),
                 lambda: dist.send(torch.ones(1), 1, group=tg)):
        try:
            call()
            raise SystemExit("a broken group accepted a call")
        except ht.GroupBrokenError as e:
            assert "unusable" in str(e) and "all_reduce" in str(e), e
    store.set("done", "1")
else:
    store.wait(["join"], datetime.timedelta(seconds=30))
    x = torch.ones(3)
    dist.all_reduce(x, group=tg)
    assert torch.equal(x, torch.full((3,), 2.0)), x
    store.wait(["done"], datetime.timedelta(seconds=30))
# The default group was not affected.
x = torch.full((2,), float(r + 1))
dist.all_reduce(x)
assert torch.equal(x, torch.full((2,), 3.0)), x
print("rank", r, "ok", flush=True)
dist.barrier()
# Rank 0's timed-out all_reduce is still posted: the process must still exit on its own.

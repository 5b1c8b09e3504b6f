"""One rank of test_torch.py: torch.distributed with the backend "hmc" under torchrun's
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and torch's own TCPStore; every
ProcessGroup operation gloo has in torch 1.13, checked exactly: data movement on every dtype
(bool, int16 and complex included), reductions on the dtypes and ops gloo reduces, subgroups,
recv from any source, and the Work's methods."""
import time
import torch, torch.distributed as dist
import hmc.torch  # noqa: F401

dist.init_process_group("hmc")
r, n = dist.get_rank(), dist.get_world_size()
R = dist.ReduceOp


def values(dtype, k, size=6):
    """Distinct values of dtype for rank (or slot) k."""
    base = torch.arange(size) + 10 * k
    if dtype == torch.bool:
        return (base + k) % 3 == 0
    if dtype.is_complex:
        return (base + 1j * (k + 1)).to(dtype)
    return base.to(dtype)


def expect_error(kind, words, f):
    try:
        f()
    except kind as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise SystemExit(f"expected {kind.__name__} mentioning {words}")


# --- the original checks -----------------------------------------------------------------------
t = torch.arange(10, dtype=torch.float32) * (r + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(10, dtype=torch.float32) * sum(range(1, n + 1))), t
rs = torch.empty(4)
dist.reduce_scatter(rs, [torch.ones(4) for _ in range(n)])
assert (rs == n).all(), rs
inp = torch.arange(n * 2, dtype=torch.float32) + 100 * r
out = torch.empty(n * 2)
dist.all_to_all_single(out, inp)
want = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float32) + 100 * j for j in range(n)])
assert torch.equal(out, want), (out, want)
expect_error(ValueError, ["contiguous"], lambda: dist.all_reduce(torch.ones(4, 4).t()))

# --- data movement on every dtype ------------------------------------------------------------
MOVE = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
        torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]
for dt in MOVE:
    b = values(dt, r)
    dist.broadcast(b, src=n - 1)
    assert torch.equal(b, values(dt, n - 1)), (dt, b)

    outs = [torch.empty(6, dtype=dt) for _ in range(n)]
    dist.all_gather(outs, values(dt, r))
    assert all(torch.equal(o, values(dt, i)) for i, o in enumerate(outs)), (dt, outs)

    # A ring: r sends to r + 1, receives from r - 1.
    got = torch.empty(6, dtype=dt)
    if r % 2 == 0:
        dist.send(values(dt, r), dst=(r + 1) % n, tag=7)
        dist.recv(got, src=(r - 1) % n, tag=7)
    else:
        dist.recv(got, src=(r - 1) % n, tag=7)
        dist.send(values(dt, r), dst=(r + 1) % n, tag=7)
    assert torch.equal(got, values(dt, (r - 1) % n)), (dt, got)

    g = [torch.empty(6, dtype=dt) for _ in range(n)] if r == 0 else None
    dist.gather(values(dt, r), gather_list=g, dst=0)
    if r == 0:
        assert all(torch.equal(x, values(dt, i)) for i, x in enumerate(g)), (dt, g)

    s = torch.empty(6, dtype=dt)
    dist.scatter(s, scatter_list=[values(dt, 100 + i) for i in range(n)] if r == n - 1 else None,
                 src=n - 1)
    assert torch.equal(s, values(dt, 100 + r)), (dt, s)

    single_in = torch.cat([values(dt, 10 * r + j, 2) for j in range(n)])
    single_out = torch.empty(2 * n, dtype=dt)
    dist.all_to_all_single(single_out, single_in)
    assert torch.equal(single_out, torch.cat([values(dt, 10 * j + r, 2) for j in range(n)])), dt

    ins = [values(dt, 10 * r + j, j + 1) for j in range(n)]
    outs = [torch.empty(r + 1, dtype=dt) for _ in range(n)]
    dist.all_to_all(outs, ins)
    assert all(torch.equal(o, values(dt, 10 * j + r, r + 1)) for j, o in enumerate(outs)), dt

# all_to_all_single with uneven split sizes on a 2-d tensor: rank r sends j + 1 rows to rank j.
rows_in = torch.cat([torch.full((j + 1, 3), 10 * r + j, dtype=torch.int16) for j in range(n)])
rows_out = torch.empty((r + 1) * n, 3, dtype=torch.int16)
dist.all_to_all_single(rows_out, rows_in, [r + 1] * n, [j + 1 for j in range(n)])
assert torch.equal(rows_out, torch.cat([torch.full((r + 1, 3), 10 * j + r, dtype=torch.int16)
                                        for j in range(n)])), rows_out

# --- reductions: gloo's dtypes and ops -----------------------------------------------------------
ARITH = [torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8, torch.int32,
         torch.int64]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]


def mine(dt, k):
    return (torch.arange(5) % 3 + k + 1).to(dt)


def reference(dt, op):
    every = [mine(dt, k) for k in range(n)]
    acc = every[0].clone()
    for x in every[1:]:
        acc = {R.SUM: lambda a, b: a + b, R.PRODUCT: lambda a, b: a * b,
               R.MIN: torch.minimum, R.MAX: torch.maximum, R.BAND: torch.bitwise_and,
               R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op](acc, x)
    return acc


for dt in ARITH:
    for op in [R.SUM, R.PRODUCT, R.MIN, R.MAX] + ([R.BAND, R.BOR, R.BXOR] if dt in INTS else []):
        x = mine(dt, r)
        dist.all_reduce(x, op=op)
        assert torch.equal(x, reference(dt, op)), (dt, op, x, reference(dt, op))
        y = mine(dt, r)
        dist.reduce(y, dst=n - 1, op=op)
        assert torch.equal(y, reference(dt, op) if r == n - 1 else mine(dt, r)), (dt, op, y)
for op, name in [(R.BAND, "BAND"), (R.BOR, "BOR"), (R.BXOR, "BXOR")]:
    expect_error(TypeError, [name, "integer"], lambda: dist.all_reduce(torch.ones(3), op=op))
expect_error(ValueError, ["PREMUL_SUM"],
             lambda: dist.all_reduce(torch.ones(3), op=dist._make_nccl_premul_sum(2.0)))
expect_error(TypeError, ["int16"], lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)))
z = torch.full((4,), 1 + 2j, dtype=torch.complex64)
dist.all_reduce(z)  # torch views complex as float pairs
assert torch.equal(z, torch.full((4,), n * (1 + 2j), dtype=torch.complex64)), z

# Coalesced forms.
cs = [torch.full((3,), float(r)), torch.full((2, 2), float(2 * r))]
dist.all_reduce_coalesced(cs)
assert torch.equal(cs[0], torch.full((3,), float(sum(range(n))))), cs
assert torch.equal(cs[1], torch.full((2, 2), float(2 * sum(range(n))))), cs
gouts = [[torch.empty(2, dtype=torch.int64), torch.empty(3, 1, dtype=torch.int64)]
         for _ in range(n)]
dist.all_gather_coalesced(gouts, [torch.full((2,), r, dtype=torch.int64),
                                  torch.full((3, 1), 10 + r, dtype=torch.int64)])
assert all(torch.equal(a, torch.full((2,), k, dtype=torch.int64)) and
           torch.equal(b, torch.full((3, 1), 10 + k, dtype=torch.int64))
           for k, (a, b) in enumerate(gouts)), gouts

# --- recv from any source: rank 0 hears from every other rank, in whatever order -------------
if r == 0:
    seen = set()
    for _ in range(n - 1):
        x = torch.empty(4, dtype=torch.int32)
        src = dist.recv(x, tag=11)
        assert torch.equal(x, torch.full((4,), 1000 + src, dtype=torch.int32)), (src, x)
        seen.add(src)
    assert seen == set(range(1, n)), seen
    # irecv from any source: the Work reports the sender.
    x = torch.empty(4, dtype=torch.int32)
    w = dist.irecv(x, tag=12)
    w.wait()
    assert w._source_rank() == n - 1 and (x == 7).all(), (w._source_rank(), x)
else:
    dist.send(torch.full((4,), 1000 + r, dtype=torch.int32), dst=0, tag=11)
    if r == n - 1:
        dist.send(torch.full((4,), 7, dtype=torch.int32), dst=0, tag=12)

# --- the Work: wait, is_completed, is_success, exception, result, get_future --------------------
a = torch.full((3,), float(r + 1))
w = dist.all_reduce(a, async_op=True)
fut = w.get_future()
done = fut.wait()
assert isinstance(fut, torch.futures.Future)
assert torch.equal(done[0], torch.full((3,), float(sum(range(1, n + 1))))), done
assert w.is_completed() and w.is_success() and w.exception() is None
assert w.result()[0] is a and w.wait()
chained = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(
    lambda f: f.value()[0] * 10)
assert torch.equal(chained.wait(), torch.full((2,), 10.0 * n))
expect_error(RuntimeError, ["source"], lambda: w._source_rank())

# monitored_barrier: the group's method (torch 1.13's dist.monitored_barrier lets only gloo in).
import datetime
dist.distributed_c10d._get_default_group().monitored_barrier(datetime.timedelta(seconds=20))

# --- subgroups: barrier and collectives on groups of any shape --------------------------------
evens = dist.new_group([k for k in range(n) if k % 2 == 0])
last_two = dist.new_group([n - 2, n - 1]) if n > 2 else None
if r % 2 == 0:
    dist.barrier(group=evens)
    v = torch.tensor([r], dtype=torch.int64)
    dist.all_reduce(v, group=evens)
    assert v.item() == sum(range(0, n, 2)), v
    g = [torch.empty(1, dtype=torch.int64) for _ in range(len(range(0, n, 2)))] if r == 0 else None
    dist.gather(torch.tensor([r]), gather_list=g, dst=0, group=evens)
    if r == 0:
        assert [x.item() for x in g] == list(range(0, n, 2)), g
if last_two is not None and r >= n - 2:
    dist.barrier(group=last_two)
    v = torch.tensor([r], dtype=torch.int64)
    dist.broadcast(v, src=n - 1, group=last_two)
    assert v.item() == n - 1, v
    if r == n - 2:
        dist.send(torch.tensor([5.0]), dst=n - 1, group=last_two, tag=1)
    else:
        x = torch.empty(1)
        assert dist.recv(x, group=last_two, tag=1) == n - 2 and x.item() == 5.0, x
dist.barrier()
dist.destroy_process_group()
if r == n - 1:
    time.sleep(1)  # alive while the others exit: test_torch.py reads what it logged of them
print("rank", r, "ok")

"""One rank of test_torch.py: torch.distributed with the backend "hmc" under torchrun's
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and torch's own TCPStore; every
operation checked exactly."""
import os, sys
import torch, torch.distributed as dist
import hmc.torch  # noqa: F401

dist.init_process_group("hmc")
r, n = dist.get_rank(), dist.get_world_size()
t = torch.arange(10, dtype=torch.float32) * (r + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(10, dtype=torch.float32) * sum(range(1, n + 1))), t
b = torch.full((5,), r, dtype=torch.int64)
dist.broadcast(b, src=n - 1)
assert (b == n - 1).all()
outs = [torch.empty(3, dtype=torch.int32) for _ in range(n)]
dist.all_gather(outs, torch.full((3,), r, dtype=torch.int32))
assert all((o == i).all() for i, o in enumerate(outs)), outs
rs = torch.empty(4)
dist.reduce_scatter(rs, [torch.ones(4) for _ in range(n)])
assert (rs == n).all(), rs
inp = torch.arange(n * 2, dtype=torch.float32) + 100 * r
out = torch.empty(n * 2)
dist.all_to_all_single(out, inp)
want = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float32) + 100 * j for j in range(n)])
assert torch.equal(out, want), (out, want)
ins = [torch.full((j + 1,), 10 * r + j, dtype=torch.int64) for j in range(n)]
outs = [torch.empty(r + 1, dtype=torch.int64) for j in range(n)]
dist.all_to_all(outs, ins)
assert all((o == 10 * j + r).all() for j, o in enumerate(outs)), outs
if n > 1:
    if r == 0:
        dist.send(torch.arange(6, dtype=torch.float64), dst=1, tag=3)
    elif r == 1:
        x = torch.empty(6, dtype=torch.float64)
        dist.recv(x, src=0, tag=3)
        assert torch.equal(x, torch.arange(6, dtype=torch.float64))
w = dist.all_reduce(torch.ones(2), async_op=True)
assert w.wait()
dist.barrier()
try:
    dist.all_reduce(torch.ones(4, 4).t())
    raise SystemExit("a non-contiguous tensor was accepted")
except ValueError:
    pass
dist.destroy_process_group()
print("rank", r, "ok")

"""One rank of test_torch.py's DistributedDataParallel test: the same 3-layer model trained 20
steps with DDP over the backend "hmc" and over gloo, in one process (the default group is hmc,
gloo a second group of every rank), in three configurations: torch's default buckets with
find_unused_parameters (a layer the forward skips), buckets of a few hundred bytes, and a comm
hook that all-reduces through Work.get_future(). The parameters must match gloo's."""
import torch, torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
import hmc.torch  # noqa: F401

dist.init_process_group("hmc")
r, n = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
hmc_pg = dist.distributed_c10d._get_default_group()


class Net(nn.Module):
    def __init__(self, unused):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)
        if unused:
            self.unused = nn.Linear(16, 16)  # never in the forward: find_unused_parameters

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def mean_hook(group, bucket):
    """The gradient bucket averaged by an all-reduce of the group, through get_future()."""
    t = bucket.buffer().div_(group.size())
    return dist.all_reduce(t, group=group, async_op=True).get_future().then(
        lambda f: f.value()[0])


def train(group, **config):
    hook = config.pop("hook", None)
    torch.manual_seed(1)  # the same initial parameters on every rank and backend
    model = DDP(Net(config.get("find_unused_parameters", False)), process_group=group, **config)
    if hook:
        model.register_comm_hook(group, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + r)  # each rank its own batches
    for _ in range(20):
        x = torch.randn(16, 8, generator=data)
        y = torch.randn(16, 4, generator=data)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.module.parameters()]


CONFIGS = {
    "default buckets, find_unused_parameters": dict(find_unused_parameters=True),
    "small buckets": dict(bucket_cap_mb=0.0005),
    "comm hook via get_future": dict(hook=mean_hook, bucket_cap_mb=0.001,
                                     find_unused_parameters=True),
}
for name, config in CONFIGS.items():
    torch.manual_seed(1)
    start = [p.detach().clone() for p in Net(config.get("find_unused_parameters", False)).parameters()]
    ours = train(hmc_pg, **dict(config))
    theirs = train(gloo, **dict(config))
    for i, (a, b, s) in enumerate(zip(ours, theirs, start)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (name, i, (a - b).abs().max())
    moved = sum(not torch.equal(a, s) for a, s in zip(ours, start))
    assert moved == 6, (name, moved)  # the three used layers trained, the unused one did not
    # Every rank holds the same parameters.
    for a in ours:
        every = [torch.empty_like(a) for _ in range(n)]
        dist.all_gather(every, a)
        assert all(torch.equal(e, a) for e in every), name
dist.destroy_process_group()
print("rank", r, "ok")

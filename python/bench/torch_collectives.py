#!/usr/bin/env python3
"""torch.distributed's operations (all_reduce, all_to_all_single, reduce, broadcast,
all_gather, gather, scatter, reduce_scatter (on gloo, which has none in torch 1.13, an
all_reduce and a copy), the coalesced all_reduce and all_gather of four tensors, send_recv (ranks
in pairs exchanging the tensor), barrier; --ops picks) and a DistributedDataParallel training step ("ddp":
four 1024 x 1024 linear layers, 16 MiB of gradients, a batch of 16) on CPU tensors, one
torch thread per process, the backend "hmc" against "gloo" in
the same run: starts --np processes itself, each timing both backends on the
same tensors, and prints the medians and the ratio (gloo time / hmc time: above 1, hmc is
faster). A sample is one operation right after a barrier, timed on rank 0, by default; with
--loop N the mean of N back-to-back operations after the barrier, and with --slowest the slowest
rank's median (nccl-tests' way: a rank that ends its part early waits in the next operation).

    PYTHONPATH=build/python python3 python/bench/torch_collectives.py [--np 4] [--sizes 1M,16M]
                                      [--reps 10] [--ops ...] [--loop N] [--slowest]
"""

import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


DDP_BYTES = 4 * (1024 * 1024 + 1024) * 4  # the ddp model's parameters (and gradients)


def ddp_step_time(reps):
    """The median time of a training step (forward, backward with DDP's gradient all-reduce,
    optimizer step) of a model wrapped in DistributedDataParallel on the default group."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(1)
    model = DDP(nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)]))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 1024), torch.randn(16, 1024)
    times = []
    for i in range(reps + 2):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def slowest(median, args):
    """With --slowest, the largest of every rank's median (else this rank's own)."""
    if not args.slowest:
        return median
    import torch
    import torch.distributed as dist
    t = torch.tensor([median], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def rank_main(args):
    import torch
    import torch.distributed as dist
    import hmc.torch  # noqa: F401

    torch.set_num_threads(1)  # the processes share the cores: one intra-op thread each
    rank = int(os.environ["RANK"])
    results = {}
    for backend in ("gloo", "hmc"):
        os.environ["MASTER_PORT"] = os.environ[f"PORT_{backend.upper()}"]
        dist.init_process_group(backend)
        if "ddp" in args.ops:
            results[(backend, "ddp", DDP_BYTES)] = slowest(ddp_step_time(args.reps), args)
        for size in args.sizes:
            x = torch.ones(size // 4, dtype=torch.float32)
            y = torch.empty_like(x)
            n = args.np
            parts = [torch.empty(size // 4 // n, dtype=torch.float32) for _ in range(n)]
            part = torch.ones(size // 4 // n, dtype=torch.float32)
            quarters = list(x.chunk(4))
            gathered = [[torch.empty_like(q) for q in quarters] for _ in range(n)]
            peer = rank ^ 1 if (rank ^ 1) < n else rank

            def reduce_scatter():
                if backend == "gloo":  # torch 1.13's gloo has none: an all-reduce and a copy
                    dist.all_reduce(x)
                    part.copy_(x[rank * part.numel():(rank + 1) * part.numel()])
                else:
                    dist.reduce_scatter(part, parts)

            def send_recv():  # ranks in pairs (0-1, 2-3, ...) exchange x
                if peer == rank:
                    return
                works = [dist.isend(x, peer), dist.irecv(y, peer)]
                for w in works:
                    w.wait()

            ops = {
                "all_reduce": lambda: dist.all_reduce(x),
                "reduce_scatter": reduce_scatter,
                "all_reduce_coalesced": lambda: dist.all_reduce_coalesced(quarters),
                "all_gather_coalesced": lambda: dist.all_gather_coalesced(gathered, quarters),
                "send_recv": send_recv,
                "barrier": lambda: dist.barrier(),
                "all_to_all": lambda: dist.all_to_all_single(y, x),
                "reduce": lambda: dist.reduce(x, 0),
                "broadcast": lambda: dist.broadcast(x, 0),
                "all_gather": lambda: dist.all_gather(parts, part),
                "gather": lambda: dist.gather(part, parts if rank == 0 else None, 0),
                "scatter": lambda: dist.scatter(part, parts if rank == 0 else None, 0),
            }
            for name in args.ops:
                if name == "ddp":
                    continue
                op = ops[name]
                times = []
                for i in range(args.reps + 2):
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(args.loop):
                        op()
                    if i >= 2:
                        times.append((time.perf_counter() - t0) / args.loop)
                results[(backend, name, size)] = slowest(sorted(times)[len(times) // 2], args)
        dist.destroy_process_group()
    if rank == 0:
        how = f"mean of {args.loop} back-to-back operations" if args.loop > 1 else "one operation"
        who = "the slowest rank's median" if args.slowest else "rank 0's median"
        print(f"# torch.distributed, {args.np} processes, CPU float32 tensors, {who} of "
              f"{args.reps} samples ({how} after a barrier; ddp: one step), us")
        print(f"# {'op':<20} {'size':>10} {'gloo':>10} {'hmc':>10} {'gloo/hmc':>9}")
        for size in args.sizes + [DDP_BYTES]:
            for name in args.ops:
                if (name == "ddp") != (size == DDP_BYTES):
                    continue
                g, h = results[("gloo", name, size)], results[("hmc", name, size)]
                print(f"  {name:<20} {size:>10} {g * 1e6:>10.1f} {h * 1e6:>10.1f} {g / h:>9.2f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--sizes", default="1M,16M")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--ops", default="all_reduce,all_to_all",
                   help="comma-separated: all_reduce, all_to_all, reduce, broadcast, all_gather, "
                        "gather, scatter, reduce_scatter, all_reduce_coalesced, "
                        "all_gather_coalesced, send_recv, barrier, ddp")
    p.add_argument("--loop", type=int, default=1,
                   help="operations per sample, back to back after the barrier (default 1)")
    p.add_argument("--slowest", action="store_true",
                   help="report the slowest rank's median rather than rank 0's")
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.loop < 1 or args.reps < 1 or args.np < 1:
        p.error("--loop, --reps and --np take a positive number")
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.ops = args.ops.split(",")
    if args.rank_main:
        return rank_main(args)
    env = dict(os.environ, WORLD_SIZE=str(args.np), MASTER_ADDR="127.0.0.1",
               PORT_GLOO=str(free_port()), PORT_HMC=str(free_port()))
    procs = [subprocess.Popen([sys.executable, __file__, "--rank-main"] + sys.argv[1:],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(args.np)]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())

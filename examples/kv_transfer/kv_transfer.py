#!/usr/bin/env python3
"""kv_transfer: a disaggregated prefill and decode pair moving paged KV caches with hmc.

The prefill process holds a paged KV cache: per layer one region of `--blocks` blocks, each
block the keys and values of `block_size` tokens ([blocks, 2, block_tokens, heads, head_dim] of
float16, `--block-bytes` bytes a block). It registers each layer and publishes its metadata
(address, region descriptors, block layout). The decode process imports the regions, reads the
blocks of a request by block id with one transfer list per layer (posted together), learns the
end by polling, and the last list's notification tells the prefill side that the blocks may be
freed. Both sides' memory is chosen with --prefill-mem and --decode-mem ("host", "cuda:0",
"hip:0", ...: any vendor on either side).

    kv_transfer.py [--layers L] [--blocks N] [--block-bytes 16K,256K,2M] [--batches 1,64,1024]
                   [--prefill-mem DEV] [--decode-mem DEV] [--check] [--reps R]
                   [--role prefill | --prefill-address HEX]

Prints blocks/s and GB/s per block size and batch. --check compares every block read with
the prefill side's bytes.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import hmc

TIMEOUT_MS = 30000
TAG_META, TAG_DONE = 1, 2
HEAD_DIM, HEADS = 128, 8  # float16: a token's K and V of one layer take 2 * 8 * 128 * 2 bytes
TOKEN_BYTES = 2 * HEADS * HEAD_DIM * 2


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    if text[-1:].upper() in units:
        return int(text[:-1]) * units[text[-1:].upper()]
    return int(text)


def layer_bytes(layer, nbytes):
    """The prefill side's cache contents of one layer: a pattern of the layer and the offset."""
    offsets = np.arange(nbytes, dtype=np.uint64)
    return ((offsets * np.uint64(2654435761) + np.uint64(layer * 977)) >> np.uint64(11)).astype(np.uint8)


class Cache:
    """One region per layer, in host memory (numpy) or a device's (hmc.Memory)."""

    def __init__(self, ctx, mem, layers, nbytes, access, fill):
        self.ctx, self.mem, self.nbytes = ctx, mem, nbytes
        self.buffers, self.regions = [], []
        for layer in range(layers):
            if mem == "host":
                buf = layer_bytes(layer, nbytes) if fill else np.zeros(nbytes, np.uint8)
            else:
                buf = ctx.alloc(mem, nbytes)
                if fill:
                    ctx.copy(buf, layer_bytes(layer, nbytes))
            self.buffers.append(buf)
            self.regions.append(ctx.register(buf, access))

    def read_back(self, layer):
        if self.mem == "host":
            return self.buffers[layer]
        out = np.empty(self.nbytes, np.uint8)
        self.ctx.copy(out, self.buffers[layer])
        return out


def prefill(args):
    nbytes = args.blocks * max(args.block_bytes)
    with hmc.Context() as ctx:
        cache = Cache(ctx, args.prefill_mem, args.layers, nbytes, hmc.ACCESS_REMOTE_READ, True)
        sys.stdout.write(ctx.address().hex() + "\n")
        sys.stdout.flush()
        peer = ctx.accept(TIMEOUT_MS)
        meta = {
            "layers": args.layers,
            "layer_bytes": nbytes,
            "layout": [args.blocks, 2, "block_tokens", HEADS, HEAD_DIM],
            "dtype": "float16",
            "regions": [r.pack().hex() for r in cache.regions],
        }
        blob = json.dumps(meta).encode()
        peer.send(np.array([len(blob)], np.uint64), tag=TAG_META).wait(TIMEOUT_MS)
        peer.send(blob, tag=TAG_META).wait(TIMEOUT_MS)
        done = np.zeros(1, np.uint64)
        finished = peer.recv(done, tag=TAG_DONE)
        freed = 0
        # A notification per request read: its blocks may be given to the next request.
        while not finished.done:
            try:
                ctx.notify_wait(200)
                freed += 1
            except hmc.TimeoutError:
                finished.test()
        finished.wait(TIMEOUT_MS)
        if freed != int(done[0]):
            print(f"prefill: {freed} requests freed, the decode side read {int(done[0])}",
                  file=sys.stderr)
            return 1
    return 0


def decode(args):
    child = None
    if args.prefill_address:
        address = bytes.fromhex(args.prefill_address)
    else:
        child = subprocess.Popen([sys.executable, __file__, "--role", "prefill"] + sys.argv[1:],
                                 stdout=subprocess.PIPE, text=True)
        address = bytes.fromhex(child.stdout.readline().strip())
    rng = np.random.default_rng(7)
    requests = 0
    with hmc.Context() as ctx:
        peer = ctx.connect(address, TIMEOUT_MS)
        size = np.zeros(1, np.uint64)
        peer.recv(size, tag=TAG_META).wait(TIMEOUT_MS)
        blob = bytearray(int(size[0]))
        peer.recv(blob, tag=TAG_META).wait(TIMEOUT_MS)
        meta = json.loads(bytes(blob))
        remotes = [peer.import_remote(bytes.fromhex(d)) for d in meta["regions"]]
        nbytes = meta["layer_bytes"]
        cache = Cache(ctx, args.decode_mem, meta["layers"], nbytes, 0, False)
        expected = [layer_bytes(l, nbytes) for l in range(meta["layers"])] if args.check else None
        print(f"# kv_transfer: {meta['layers']} layers, prefill {args.prefill_mem} -> decode "
              f"{args.decode_mem}, path {peer.info()['path']}")
        print(f"# {'block':>8} {'batch':>6} {'lists':>6} {'blocks/s':>12} {'GB/s':>8} {'us/req':>10}")
        for block in args.block_bytes:
            per_layer = nbytes // block
            for batch in args.batches:
                batch = min(batch, per_layer)
                times = []
                for rep in range(args.reps):
                    # The request's blocks on the prefill side, by id; placed from 0 here.
                    ids = rng.choice(per_layer, size=batch, replace=False)
                    descs = np.zeros((batch, 3), np.uint64)
                    descs[:, 0] = np.arange(batch, dtype=np.uint64) * block
                    descs[:, 1] = ids.astype(np.uint64) * block
                    descs[:, 2] = block
                    lists = [peer.prepare(cache.regions[l], remotes[l], "read", descs)
                             for l in range(meta["layers"])]
                    t0 = time.perf_counter()
                    reqs = [lst.post() for lst in lists[:-1]]
                    # The last layer's list notifies the prefill side once its bytes are here;
                    # posted after the others ended, it says the whole request was read.
                    while not all(r.test() is not None for r in reqs):
                        pass
                    last = lists[-1].post(notify=requests)
                    while last.test() is None:
                        pass
                    times.append(time.perf_counter() - t0)
                    requests += 1
                    if args.check:
                        for l in range(meta["layers"]):
                            got = cache.read_back(l)
                            for j, b in enumerate(ids):
                                a = got[j * block:(j + 1) * block]
                                w = expected[l][int(b) * block:(int(b) + 1) * block]
                                if not np.array_equal(a, w):
                                    print(f"layer {l} block {b}: bytes differ", file=sys.stderr)
                                    return 1
                    for lst in lists:
                        lst.release()
                t = sorted(times)[len(times) // 2]
                moved = batch * block * meta["layers"]
                print(f"  {block:>8} {batch:>6} {meta['layers']:>6} "
                      f"{batch * meta['layers'] / t:>12.0f} {moved / t / 1e9:>8.3f} {t * 1e6:>10.1f}")
        peer.send(np.array([requests], np.uint64), tag=TAG_DONE).wait(TIMEOUT_MS)
    code = child.wait(60) if child else 0
    if code != 0:
        print(f"the prefill process failed ({code})", file=sys.stderr)
        return 1
    if args.check:
        print(f"# every block of {requests} requests matched the prefill side's bytes")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", choices=["decode", "prefill"], default="decode",
                   help="prefill: hold the cache and print its address (started by the decode "
                        "side unless --prefill-address is given)")
    p.add_argument("--prefill-address", help="decode: the address a prefill process printed "
                   "(hex); without it the decode side starts one here")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--blocks", type=int, default=256, help="blocks per layer at the largest size")
    p.add_argument("--block-bytes", default="16K,256K,2M",
                   help="block sizes, comma-separated (16K is 8 tokens of 8 heads of 128)")
    p.add_argument("--batches", default="1,64,1024", help="blocks per request")
    p.add_argument("--prefill-mem", default="host")
    p.add_argument("--decode-mem", default="host")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    args.block_bytes = [parse_size(s) for s in args.block_bytes.split(",")]
    args.batches = [int(s) for s in args.batches.split(",")]
    for b in args.block_bytes:
        if b % TOKEN_BYTES:
            p.error(f"block size {b} is not a whole number of tokens ({TOKEN_BYTES} bytes each)")
    return prefill(args) if args.role == "prefill" else decode(args)


if __name__ == "__main__":
    sys.exit(main())

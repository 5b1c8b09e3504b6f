"""A torch.distributed backend over hmc: ``import hmc.torch`` registers the backend "hmc".

    import torch.distributed as dist
    import hmc.torch  # noqa: F401
    dist.init_process_group("hmc")          # torchrun's RANK, WORLD_SIZE, MASTER_ADDR/PORT

The group joins an hmc.Communicator, whose rendezvous address rank 0 publishes through the c10d
store torch passes in; collectives run on hmc's collectives, send/recv on hmc peers. Tensors
must be contiguous; any device hmc reaches (CPU here; CUDA and ROCm tensors by their pointers).
Written for torch 1.13 (a Python ProcessGroup); torch 2.x registers backends with
``devices=`` and wraps them in c10d::Backend (see docs/python.md).
"""

import datetime
import os
import socket
import threading

import torch
import torch.distributed as dist

import hmc

_DTYPES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
}
_OPS = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.PRODUCT: "prod",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
}
if hasattr(dist.ReduceOp, "AVG"):
    _OPS[dist.ReduceOp.AVG] = "avg"

_context = None
_context_lock = threading.Lock()


def _shared_context():
    """One hmc context per process, shared by every group."""
    global _context
    with _context_lock:
        if _context is None or _context.closed:
            _context = hmc.Context()
        return _context


def _buffer(t, what):
    """A tensor as hmc sees it: (pointer, bytes) of contiguous memory."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (call .contiguous() first)")
    if t.dtype not in _DTYPES:
        raise TypeError(f"{what}: hmc has no reduction type for {t.dtype}")
    return (t.data_ptr(), t.numel() * t.element_size())


def _op(opts, what):
    op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
    if op not in _OPS:
        raise ValueError(f"{what}: hmc has no reduction {op}")
    return _OPS[op]


class _Work(dist._Work):
    """Requests of one operation; holds its tensors until they end. `then` runs after a
    successful wait (copies out of a staging tensor)."""

    def __init__(self, requests, keep, then=None):
        super().__init__()
        self._requests, self._keep, self._then, self._done = requests, keep, then, False

    def wait(self, timeout=datetime.timedelta(0)):
        ms = int(timeout.total_seconds() * 1000) if timeout else -1
        for r in self._requests:
            r.wait(ms if ms > 0 else -1)
        if not self._done:
            self._done = True
            if self._then:
                self._then()
            self._keep = None
        return True

    def is_completed(self):
        return all(r.done or r.test() is not None for r in self._requests)

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None


class ProcessGroupHmc(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._ctx = _shared_context()
        ms = int(timeout.total_seconds() * 1000) if timeout else -1
        # Rank 0 hosts the communicator's rendezvous; the c10d store tells the others where.
        if rank == 0:
            host = os.environ.get("MASTER_ADDR", "127.0.0.1")
            with socket.socket() as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
            store.set("hmc/rendezvous", f"tcp://{host}:{port}")
        rendezvous = store.get("hmc/rendezvous").decode()
        self._comm = hmc.Communicator(self._ctx, rank, size, rendezvous, ms)
        # Point to point: every rank's address, for peers made when first used.
        store.set(f"hmc/address/{rank}", self._ctx.address().hex())
        self._store, self._timeout_ms, self._peers = store, ms, {}
        self._peer_lock = threading.Lock()

    def getBackendName(self):
        return "hmc"

    # --- collectives ---------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        t = tensors[0]
        req = self._comm.all_reduce(_buffer(t, "all_reduce"), op=_op(opts, "all_reduce"),
                                    dtype=_DTYPES[t.dtype])
        return _Work([req], [t])

    def broadcast(self, tensors, opts=None):
        t = tensors[0]
        root = getattr(opts, "rootRank", 0)
        req = self._comm.broadcast(_buffer(t, "broadcast"), root=root, dtype=_DTYPES[t.dtype])
        return _Work([req], [t])

    def _allgather_base(self, output, input, opts=None):
        req = self._comm.all_gather(_buffer(input, "all_gather"), _buffer(output, "all_gather"),
                                    dtype=_DTYPES[input.dtype])
        return _Work([req], [output, input])

    def allgather(self, output_lists, inputs, opts=None):
        outputs, t = output_lists[0], inputs[0]
        staging = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype, device=t.device)
        req = self._comm.all_gather(_buffer(t, "all_gather"), _buffer(staging, "all_gather"),
                                    dtype=_DTYPES[t.dtype])

        def scatter_out():
            for i, o in enumerate(outputs):
                o.copy_(staging[i])

        return _Work([req], [staging, t], scatter_out)

    def _reduce_scatter_base(self, output, input, opts=None):
        req = self._comm.reduce_scatter(_buffer(input, "reduce_scatter"),
                                        _buffer(output, "reduce_scatter"),
                                        op=_op(opts, "reduce_scatter"), dtype=_DTYPES[input.dtype])
        return _Work([req], [output, input])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        out = outputs[0]
        flat = torch.cat([x.reshape(-1) for x in input_lists[0]])
        req = self._comm.reduce_scatter(_buffer(flat, "reduce_scatter"),
                                        _buffer(out, "reduce_scatter"),
                                        op=_op(opts, "reduce_scatter"), dtype=_DTYPES[out.dtype])
        return _Work([req], [out, flat])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        n = self.size()
        row = input[0].numel() if input.dim() > 0 and input.numel() else 1
        if not output_split_sizes and not input_split_sizes:
            req = self._comm.all_to_all(_buffer(input, "all_to_all_single"),
                                        _buffer(output, "all_to_all_single"),
                                        dtype=_DTYPES[input.dtype])
            return _Work([req], [output, input])
        ins = list(input_split_sizes) or [input.shape[0] // n] * n
        outs = list(output_split_sizes) or [output.shape[0] // n] * n
        scale = row if input.dim() > 1 else 1
        sc = [s * scale for s in ins]
        rc = [s * scale for s in outs]
        sd = [sum(sc[:i]) for i in range(n)]
        rd = [sum(rc[:i]) for i in range(n)]
        req = self._comm.all_to_allv(_buffer(input, "all_to_all_single"), sc, sd,
                                     _buffer(output, "all_to_all_single"), rc, rd,
                                     dtype=_DTYPES[input.dtype])
        return _Work([req], [output, input])

    def alltoall(self, outputs, inputs, opts=None):
        n = self.size()
        flat_in = torch.cat([x.reshape(-1) for x in inputs])
        counts_in = [x.numel() for x in inputs]
        counts_out = [x.numel() for x in outputs]
        flat_out = torch.empty(sum(counts_out), dtype=flat_in.dtype, device=flat_in.device)
        sd = [sum(counts_in[:i]) for i in range(n)]
        rd = [sum(counts_out[:i]) for i in range(n)]
        req = self._comm.all_to_allv(_buffer(flat_in, "all_to_all"), counts_in, sd,
                                     _buffer(flat_out, "all_to_all"), counts_out, rd,
                                     dtype=_DTYPES[flat_in.dtype])

        def split_out():
            for i, o in enumerate(outputs):
                o.copy_(flat_out[rd[i]:rd[i] + counts_out[i]].view_as(o))

        return _Work([req], [flat_in, flat_out], split_out)

    def barrier(self, opts=None):
        return _Work([self._comm.barrier()], None)

    # --- point to point ------------------------------------------------------------------------

    def _peer(self, other):
        """The hmc peer for rank `other`: the lower rank connects, the higher accepts, and the
        connector names itself in a first message."""
        with self._peer_lock:
            if other in self._peers:
                return self._peers[other]
            me = self.rank()
            if me < other:
                addr = bytes.fromhex(self._store.get(f"hmc/address/{other}").decode())
                p = self._ctx.connect(addr, self._timeout_ms)
                p.send(bytes([me & 0xff, me >> 8]), tag=_HELLO_TAG).wait(self._timeout_ms)
                self._peers[other] = p
                return p
            while other not in self._peers:
                p = self._ctx.accept(self._timeout_ms)
                who = bytearray(2)
                p.recv(who, tag=_HELLO_TAG).wait(self._timeout_ms)
                self._peers[who[0] | (who[1] << 8)] = p
            return self._peers[other]

    def send(self, tensors, dst, tag=0):
        t = tensors[0]
        return _Work([self._peer(dst).send(_buffer(t, "send"), tag=_user_tag(tag))], [t])

    def recv(self, tensors, src, tag=0):
        t = tensors[0]
        return _Work([self._peer(src).recv(_buffer(t, "recv"), tag=_user_tag(tag))], [t])


_HELLO_TAG = hmc.TAG_MAX - 1


def _user_tag(tag):
    if tag < 0 or tag >= hmc.TAG_MAX - 1:
        raise ValueError(f"tag {tag} outside 0..{hmc.TAG_MAX - 2}")
    return tag


def _create(store, rank, size, timeout):
    return ProcessGroupHmc(store, rank, size, timeout)


if not hasattr(dist.Backend, "HMC"):  # imported once per process, whatever the module's name
    dist.Backend.register_backend("hmc", _create)

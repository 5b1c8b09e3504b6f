"""A torch.distributed backend over hmc: ``import hmc.torch`` registers the backend "hmc".

    import torch.distributed as dist
    import hmc.torch  # noqa: F401
    dist.init_process_group("hmc")          # torchrun's RANK, WORLD_SIZE, MASTER_ADDR/PORT

The group joins an hmc.Communicator, whose rendezvous address rank 0 publishes through the c10d
store torch passes in; collectives run on hmc's collectives, send/recv on hmc peers. Tensors
must be contiguous; any device hmc reaches (CPU here; CUDA and ROCm tensors by their pointers).
Operations hmc has no collective for are composed: gather and scatter are point-to-point with
the root, the coalesced forms one operation on the tensors laid end to end.

Timeouts: the timeout given to init_process_group/new_group bounds every operation of the
group and its connection set-up; an operation that outlives it raises GroupTimeoutError (a
RuntimeError) naming the operation and the ranks it waited for, and the group is then broken:
every later call raises GroupBrokenError. Written for torch 1.13 (a Python ProcessGroup);
torch 2.x registers backends with ``devices=`` and wraps them in c10d::Backend (docs/python.md).
"""

import atexit
import collections
import datetime
import os
import queue
import random
import socket
import threading
import time

import torch
import torch.distributed as dist

import hmc

# The dtypes hmc reduces (torch's name -> hmc's); data movement takes every dtype as bytes.
_REDUCE_DTYPES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
}
_INTEGER_DTYPES = {torch.int8, torch.uint8, torch.int32, torch.int64}
_OPS = {
    "SUM": "sum",
    "PRODUCT": "prod",
    "MIN": "min",
    "MAX": "max",
    "AVG": "avg",
    "BAND": "band",
    "BOR": "bor",
    "BXOR": "bxor",
}
_BITWISE = {"band", "bor", "bxor"}


class GroupTimeoutError(RuntimeError):
    """An operation of the group did not end within the group's timeout (or wait's)."""


class GroupBrokenError(RuntimeError):
    """The group refuses every call after one of its operations failed or timed out."""


_context = None
_context_lock = threading.Lock()
_unclean = False  # an operation of some group failed: its requests may still hold tensors


@atexit.register
def _close_at_exit():
    """Closes the shared context as the interpreter exits, so that the other ranks hear this one
    leave (at info level) rather than see its connections drop ("peer lost" warnings). Not when
    an operation failed (its context keeps what its requests may still write into) or a thread
    still waits in hmc: an exit never waits for either."""
    ctx = _context
    if ctx is None or _unclean:
        return
    try:
        ctx._close_if_idle()
    except Exception:  # noqa: BLE001: the exit goes on whatever the context says
        pass


def _shared_context():
    """One hmc context per process, shared by every group."""
    global _context
    with _context_lock:
        if _context is None or _context.closed:
            _context = hmc.Context()
        return _context


def _op_name(op):
    """ReduceOp by name ("BAND"), whichever form torch hands over."""
    inner = getattr(op, "op", op)
    return getattr(inner, "name", None) or str(inner)


def _check(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (call .contiguous() first)")
    return t


def _bytes(t, what):
    """A tensor as bytes for data movement: (pointer, size) and the dtype hmc moves it as."""
    _check(t, what)
    return (t.data_ptr(), t.numel() * t.element_size())


def _reducible(t, what, op="SUM"):
    """(pointer, size) and hmc's dtype of a tensor to reduce, refusing what hmc cannot."""
    _check(t, what)
    if t.dtype not in _REDUCE_DTYPES:
        raise TypeError(f"{what}: hmc cannot reduce {t.dtype} (it reduces "
                        f"{', '.join(str(d) for d in _REDUCE_DTYPES)})")
    if _OPS.get(op) in _BITWISE and t.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"{what}: ReduceOp.{op} is defined on integer tensors only, not {t.dtype}")
    return (t.data_ptr(), t.numel() * t.element_size()), _REDUCE_DTYPES[t.dtype]


def _op(opts, what):
    """hmc's name of the options' ReduceOp, with torch's name for messages."""
    op = getattr(opts, "reduceOp", None)
    name = "SUM" if op is None else _op_name(op)
    if name not in _OPS:
        raise ValueError(f"{what}: hmc has no reduction ReduceOp.{name} "
                         f"(it has {', '.join('ReduceOp.' + n for n in _OPS)})")
    return name


def _ms(timeout):
    """A timedelta as milliseconds; None or zero: None (the group's timeout)."""
    if timeout is None:
        return None
    ms = int(timeout.total_seconds() * 1000)
    return ms if ms > 0 else None


class _Work(dist._Work):
    """One operation: its hmc requests (or a function that waits), the tensors they use, what
    runs after a successful wait (copies out of a staging tensor) and the result torch sees.

    torch's C++ callers (DistributedDataParallel, broadcast_coalesced) hold only the C++ half of
    a Work made in Python: the group keeps the Python half alive until it ended, else their
    wait() would reach the base class's and never return."""

    def __init__(self, pg, what, requests, keep, result, then=None, source=None, waiter=None,
                 staged=()):
        super().__init__()
        self._pg, self._what, self._requests, self._keep = pg, what, requests, keep
        self._result, self._then, self._source, self._waiter = result, then, source, waiter
        self._staged = staged  # the group's staging buffers among keep, given back on success
        self._lock = threading.Lock()  # held by the one thread that waits for the requests
        self._future_lock = threading.Lock()
        self._ended = threading.Event()
        self._error = None
        self._future = None
        pg._track(self)

    # The end, once: waits up to ms (None: the group's timeout) for every request.
    def _finish(self, ms, by_group):
        if self._ended.is_set():
            return True
        start = time.monotonic()
        limit = self._pg._timeout_ms if ms is None else ms
        if not self._lock.acquire(timeout=limit / 1000 if limit >= 0 else -1):
            return self._timed_out(limit, by_group and ms is None)
        try:
            if self._ended.is_set():
                return True
            try:
                if self._waiter is not None:
                    self._waiter(lambda: _left(start, limit))
                for r in self._requests:
                    r.wait(_left(start, limit))
            except hmc.TimeoutError:
                return self._timed_out(limit, ms is None)
            except Exception as e:  # noqa: BLE001: every failure becomes the Work's error
                self._end(RuntimeError(f"hmc: {self._what} on rank {self._pg.rank()} of "
                                       f"{self._pg.size()} failed: {e}"), broken=True)
                return True
            try:
                if self._then:
                    self._then()
            except Exception as e:  # noqa: BLE001
                self._end(e, broken=False)
                return True
            self._end(None, broken=False)
            return True
        finally:
            self._lock.release()

    def _timed_out(self, limit, breaks):
        err = GroupTimeoutError(
            f"hmc: {self._what} on rank {self._pg.rank()} of {self._pg.size()} did not end "
            f"within {limit} ms (waiting for {self._pg._waited_for(self)})")
        if breaks:
            # Collectives cannot be cancelled: the tensors stay with the group, never freed
            # under a request that may still write into them.
            self._end(err, broken=True)
            return True
        raise err

    def _end(self, error, broken):
        self._error = error
        if error is None:
            self._keep = None
            if self._staged:
                self._pg._staging.give(self._staged)
            self._staged = ()
        if broken:
            self._pg._break(self, error)
        else:
            self._pg._untrack(self)
        with self._future_lock:
            self._ended.set()
            fut = self._future
        if fut is not None:
            _settle(fut, self._result, error)

    def wait(self, timeout=datetime.timedelta(0)):
        self._finish(_ms(timeout), by_group=True)
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if self._ended.is_set():
            return True
        if self._lock.locked():
            return False  # another thread waits for it (get_future's): it ends it
        try:
            if self._waiter is not None:
                # A receive from any source: complete once one of its receives ended.
                ready = any(r.done or r.test() is not None for r in self._waiter.requests)
            else:
                ready = all(r.done or r.test() is not None for r in self._requests)
        except hmc.Error:
            ready = True  # failed: _finish records the failure
        if ready:
            try:
                self._finish(None, by_group=True)
            except GroupTimeoutError:
                pass
        return self._ended.is_set()

    def is_success(self):
        """As torch defines it: False once the operation failed (True while it runs)."""
        self.is_completed()
        return self._error is None

    def exception(self):
        self.is_completed()
        return self._error

    def result(self):
        self.wait()
        return self._result

    def source_rank(self):
        if self._source is None:
            raise RuntimeError(f"hmc: source_rank() of {self._what}: only recv has a source")
        self.wait()
        return self._source() if callable(self._source) else self._source

    def _source_rank(self):
        return self.source_rank()

    def synchronize(self):
        pass

    def get_future(self):
        """A torch.futures.Future completed with result() (or the error) when the operation
        ends, without anyone calling wait()."""
        with self._future_lock:
            fut, fresh = self._future, self._future is None
            if fresh:
                fut = self._future = torch.futures.Future()
            ended = self._ended.is_set()
        if fresh and ended:
            _settle(fut, self._result, self._error)
        elif fresh:
            self._pg._complete_later(self)
        return fut


def _settle(fut, result, error):
    if error is None:
        fut.set_result(result)
    else:
        fut.set_exception(error)


def _left(start, limit):
    if limit < 0:
        return -1
    return max(1, int(limit - (time.monotonic() - start) * 1000))


class _StagingPool:
    """Staging buffers of a group, kept for its next operation of the same size. A fresh buffer
    costs more than its allocation: the other ranks' writes into it (process_vm_writev on one
    host) take its page faults one by one, 1.1 ms for a fresh 1 MiB all-gather output on 4 ranks
    against 0.1 ms to fill it locally. A buffer comes back only from an operation that
    succeeded (after a failure hmc may still write into it); at most `limit` bytes are kept."""

    def __init__(self, limit=256 << 20):
        self._free = {}  # (device, bytes) -> [uint8 tensor]
        self._held = 0
        self._limit = limit
        self._lock = threading.Lock()

    def take(self, nbytes, dtype=torch.uint8, device="cpu"):
        """A 1-D tensor of dtype over nbytes of staging on device (nbytes a multiple of the
        dtype's size)."""
        device = torch.device(device)
        with self._lock:
            free = self._free.get((device, nbytes))
            buf = free.pop() if free else None
            if buf is not None:
                self._held -= nbytes
        if buf is None:
            buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return buf.view(dtype)

    def give(self, bufs):
        with self._lock:
            for b in bufs:
                b = b.reshape(-1).view(torch.uint8)  # the flat bytes, whatever view it was used as
                if self._held + b.numel() > self._limit:
                    self._free.clear()  # the newest sizes win
                    self._held = 0
                if b.numel() <= self._limit:
                    self._free.setdefault((b.device, b.numel()), []).append(b)
                    self._held += b.numel()


class _Peers:
    """Point-to-point peers of this process, by the other process's context address, shared by
    every group (tags keep the groups apart). Of each pair the lower address connects and names
    itself in a first message; the other accepts, filing whatever arrives."""

    def __init__(self):
        self.by_address = {}
        self.lock = threading.Lock()

    def get(self, ctx, address, timeout_ms):
        with self.lock:
            p = self.by_address.get(address)
            if p is not None:
                return p
            mine = ctx.address()
            if mine < address:
                p = ctx.connect(address, timeout_ms)
                p.send(bytes([len(mine)]) + mine, tag=_HELLO_TAG).wait(timeout_ms)
                self.by_address[address] = p
                return p
            start = time.monotonic()
            while address not in self.by_address:
                p = ctx.accept(_left(start, timeout_ms))
                who = bytearray(1 + hmc.ADDRESS_MAX)
                p.recv(who, tag=_HELLO_TAG).wait(_left(start, timeout_ms))
                self.by_address[bytes(who[1:1 + who[0]])] = p
            return self.by_address[address]


_peers = _Peers()
_HELLO_TAG = hmc.TAG_MAX - 1


class ProcessGroupHmc(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._ctx = _shared_context()
        ms = int(timeout.total_seconds() * 1000) if timeout else -1
        self._timeout_ms = ms
        self._lock = threading.Lock()
        self._running = {}  # id -> _Work not yet ended (C++ callers hold only their C++ half)
        self._ended = collections.deque(maxlen=256)  # recently ended, for a late second wait
        self._broken = None  # the error that broke the group
        self._kept = []  # works that failed while hmc may still write their tensors
        self._completer = None
        self._stash = collections.defaultdict(collections.deque)  # (src, tag) -> early messages
        self._staging = _StagingPool()
        # Rank 0 hosts the communicator's rendezvous; the c10d store tells the others where.
        if rank == 0:
            host = os.environ.get("MASTER_ADDR", "127.0.0.1")
            with socket.socket() as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
            store.set("hmc/rendezvous", f"tcp://{host}:{port}")
            store.set("hmc/group", str(random.getrandbits(24)))
        rendezvous = store.get("hmc/rendezvous").decode()
        # Tags of this group's point-to-point messages: the group's number above torch's tag.
        self._tag_base = int(store.get("hmc/group").decode()) << 32
        self._comm = hmc.Communicator(self._ctx, rank, size, rendezvous, ms)
        store.set(f"hmc/address/{rank}", self._ctx.address().hex())
        self._store, self._addresses = store, {}
        # Connection set-up now, while every rank is here (they all just joined): an all-to-all
        # of one byte connects every pair, so that no later operation connects.
        if size > 1:
            one = torch.zeros(size, dtype=torch.uint8)
            got = torch.empty(size, dtype=torch.uint8)
            self._wrap("connecting the group", [self._comm.all_to_all(
                _bytes(one, "connect"), _bytes(got, "connect"), dtype="uint8")],
                [one, got], None).wait()
            # And the point-to-point peers (gloo's full mesh): connectors first, which never
            # wait for the other side's program, then the peers that connect to this rank.
            mine = self._ctx.address()
            order = sorted((r for r in range(size) if r != rank),
                           key=lambda r: self._address(r) < mine)
            for r in order:
                self._peer(r)

    def getBackendName(self):
        return "hmc"

    def __repr__(self):
        state = "broken" if self._broken else "usable"
        return (f"<hmc.torch.ProcessGroupHmc rank {self.rank()} of {self.size()}, timeout "
                f"{self._timeout_ms} ms, {state}>")

    # --- Works and the group's state -----------------------------------------------------------

    def _wrap(self, what, requests, keep, result, then=None, source=None, waiter=None,
              staged=()):
        return _Work(self, what, requests, keep, result, then, source, waiter, staged)

    def _flat(self, tensors, what, dtype=None):
        """The tensors laid end to end in a staging buffer (of dtype, else bytes)."""
        parts = [_check(t, what).reshape(-1) for t in tensors]
        if dtype is not None and any(p.dtype != dtype for p in parts):
            raise TypeError(f"{what}: the tensors' dtypes differ")
        if dtype is None:
            parts = [p.view(torch.uint8) for p in parts]
            dtype = torch.uint8
        n = sum(p.numel() for p in parts)
        device = parts[0].device if parts else "cpu"
        flat = self._staging.take(n * torch.empty(0, dtype=dtype).element_size(), dtype, device)
        if parts:
            torch.cat(parts, out=flat)
        return flat

    def _track(self, w):
        with self._lock:
            self._running[id(w)] = w
            sweep = len(self._running) > 256 and list(self._running.values())
        # Works nobody waits for (an isend left alone) end here, once their requests did.
        for old in sweep or ():
            if old is not w and old._waiter is None:
                old.is_completed()

    def _untrack(self, w):
        with self._lock:
            self._running.pop(id(w), None)
            self._ended.append(w)

    def _break(self, w, error):
        global _unclean
        _unclean = True
        with self._lock:
            self._running.pop(id(w), None)
            self._kept.append(w)
            if self._broken is None:
                self._broken = error

    def _waited_for(self, w):
        ranks = getattr(w, "_ranks", None)
        if ranks is None:
            ranks = [r for r in range(self.size()) if r != self.rank()]
        return "rank " + ", ".join(map(str, ranks)) if len(ranks) == 1 else \
            "ranks " + ", ".join(map(str, ranks))

    def _usable(self, what):
        if self._broken is not None:
            raise GroupBrokenError(f"hmc: {what}: the group is unusable since an earlier "
                                   f"operation failed ({self._broken})")

    def _complete_later(self, w):
        """Ends w (and completes its future) in the group's completion thread."""
        with self._lock:
            if self._completer is None:
                self._completer = queue.SimpleQueue()
                threading.Thread(target=self._complete_loop, args=(self._completer,),
                                 name="hmc.torch completion", daemon=True).start()
        self._completer.put(w)

    @staticmethod
    def _complete_loop(q):
        while True:
            w = q.get()
            try:
                w._finish(None, by_group=True)
            except Exception:  # noqa: BLE001: recorded in the Work
                pass

    # --- collectives ---------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        self._usable("all_reduce")
        op = _op(opts, "all_reduce")
        reqs = []
        for t in tensors:
            buf, dtype = _reducible(t, "all_reduce", op)
            reqs.append(self._comm.all_reduce(buf, op=_OPS[op], dtype=dtype))
        return self._wrap(f"all_reduce (ReduceOp.{op})", reqs, list(tensors), list(tensors))

    def allreduce_coalesced(self, tensors, opts=None):
        self._usable("all_reduce_coalesced")
        op = _op(opts, "all_reduce_coalesced")
        if not tensors:
            return self._wrap("all_reduce_coalesced", [], None, [])
        if len({t.dtype for t in tensors}) != 1:
            raise TypeError("all_reduce_coalesced: the tensors' dtypes differ")
        # One all-reduce of the tensors laid end to end.
        flat = self._flat(tensors, "all_reduce_coalesced", tensors[0].dtype)
        buf, dtype = _reducible(flat, "all_reduce_coalesced", op)
        req = self._comm.all_reduce(buf, op=_OPS[op], dtype=dtype)

        def split_out():
            at = 0
            for t in tensors:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()

        return self._wrap(f"all_reduce_coalesced (ReduceOp.{op})", [req], [flat] + list(tensors),
                          list(tensors), split_out, staged=[flat])

    def reduce(self, tensors, opts=None):
        """hmc's reduce: the root's tensor holds the result, the others' stay as they were."""
        self._usable("reduce")
        op = _op(opts, "reduce")
        root = getattr(opts, "rootRank", 0)
        self._check_rank(root, "reduce")
        t = tensors[0]
        buf, dtype = _reducible(t, "reduce", op)
        req = self._comm.reduce(buf, op=_OPS[op], root=root, dtype=dtype)
        return self._wrap(f"reduce (ReduceOp.{op}, root {root})", [req], [t], [t])

    def broadcast(self, tensors, opts=None):
        self._usable("broadcast")
        root = getattr(opts, "rootRank", 0)
        self._check_rank(root, "broadcast")
        reqs = [self._comm.broadcast(_bytes(t, "broadcast"), root=root, dtype="uint8")
                for t in tensors]
        return self._wrap(f"broadcast (root {root})", reqs, list(tensors), list(tensors))

    def _allgather_base(self, output, input, opts=None):
        self._usable("all_gather")
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            raise ValueError(f"_allgather_base: the output holds {output.numel()} {output.dtype}, "
                             f"not {self.size()} x {input.numel()} {input.dtype}")
        req = self._comm.all_gather(_bytes(input, "all_gather"), _bytes(output, "all_gather"),
                                    dtype="uint8")
        return self._wrap("all_gather", [req], [output, input], [output])

    def allgather(self, output_lists, inputs, opts=None):
        self._usable("all_gather")
        outputs, t = output_lists[0], _check(inputs[0], "all_gather")
        if len(outputs) != self.size():
            raise ValueError(f"all_gather: {len(outputs)} output tensors for {self.size()} ranks")
        staging = self._staging.take(self.size() * t.numel() * t.element_size(), t.dtype,
                                     t.device)
        staging = staging.view((self.size(),) + tuple(t.shape))
        req = self._comm.all_gather(_bytes(t, "all_gather"), _bytes(staging, "all_gather"),
                                    dtype="uint8")

        def scatter_out():
            for i, o in enumerate(outputs):
                o.copy_(staging[i])

        return self._wrap("all_gather", [req], [staging, t], output_lists, scatter_out,
                          staged=[staging])

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        """Every rank's inputs, laid end to end and gathered once."""
        self._usable("all_gather_coalesced")
        n = self.size()
        if len(output_lists) != n:
            raise ValueError(f"all_gather_coalesced: {len(output_lists)} output lists for {n} "
                             "ranks")
        flat = self._flat(inputs, "all_gather_coalesced")
        staging = self._staging.take(n * flat.numel(), device=flat.device)
        req = self._comm.all_gather(_bytes(flat, "all_gather_coalesced"),
                                    _bytes(staging, "all_gather_coalesced"), dtype="uint8")

        def split_out():
            for r, outs in enumerate(output_lists):
                at = r * flat.numel()
                for o, t in zip(outs, inputs):
                    size = t.numel() * t.element_size()
                    o.view(-1).view(torch.uint8).copy_(staging[at:at + size])
                    at += size

        return self._wrap("all_gather_coalesced", [req], [flat, staging], output_lists, split_out,
                          staged=[flat, staging])

    def gather(self, output_lists, inputs, opts=None):
        """Point to point: every rank sends to the root, which receives into its outputs."""
        self._usable("gather")
        root = getattr(opts, "rootRank", 0)
        self._check_rank(root, "gather")
        t = _check(inputs[0], "gather")
        me = self.rank()
        tag = self._internal_tag(_GATHER)
        if me != root:
            req = self._peer(root).send(_bytes(t, "gather"), tag=tag)
            w = self._wrap(f"gather (root {root})", [req], [t], [])
            w._ranks = [root]
            return w
        outputs = output_lists[0]
        if len(outputs) != self.size():
            raise ValueError(f"gather: {len(outputs)} output tensors for {self.size()} ranks")
        reqs = [self._peer(r).recv(_bytes(outputs[r], "gather"), tag=tag)
                for r in range(self.size()) if r != me]

        def own():
            outputs[me].copy_(t)

        return self._wrap(f"gather (root {root})", reqs, [t] + list(outputs), output_lists, own)

    def scatter(self, outputs, input_lists, opts=None):
        """Point to point: the root sends each rank its tensor."""
        self._usable("scatter")
        root = getattr(opts, "rootRank", 0)
        self._check_rank(root, "scatter")
        out = _check(outputs[0], "scatter")
        me = self.rank()
        tag = self._internal_tag(_SCATTER)
        if me != root:
            req = self._peer(root).recv(_bytes(out, "scatter"), tag=tag)
            w = self._wrap(f"scatter (root {root})", [req], [out], outputs)
            w._ranks = [root]
            return w
        inputs = input_lists[0]
        if len(inputs) != self.size():
            raise ValueError(f"scatter: {len(inputs)} input tensors for {self.size()} ranks")
        reqs = [self._peer(r).send(_bytes(inputs[r], "scatter"), tag=tag)
                for r in range(self.size()) if r != me]
        out.copy_(inputs[me])
        return self._wrap(f"scatter (root {root})", reqs, list(inputs) + [out], outputs)

    def _reduce_scatter_base(self, output, input, opts=None):
        self._usable("reduce_scatter")
        op = _op(opts, "reduce_scatter")
        ibuf, dtype = _reducible(input, "reduce_scatter", op)
        obuf, _ = _reducible(output, "reduce_scatter", op)
        req = self._comm.reduce_scatter(ibuf, obuf, op=_OPS[op], dtype=dtype)
        return self._wrap(f"reduce_scatter (ReduceOp.{op})", [req], [output, input], [output])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        self._usable("reduce_scatter")
        op = _op(opts, "reduce_scatter")
        out = outputs[0]
        flat = self._flat(input_lists[0], "reduce_scatter", out.dtype)
        ibuf, dtype = _reducible(flat, "reduce_scatter", op)
        obuf, _ = _reducible(out, "reduce_scatter", op)
        req = self._comm.reduce_scatter(ibuf, obuf, op=_OPS[op], dtype=dtype)
        return self._wrap(f"reduce_scatter (ReduceOp.{op})", [req], [out, flat], outputs,
                          staged=[flat])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        self._usable("all_to_all_single")
        n = self.size()
        _check(input, "all_to_all_single")
        _check(output, "all_to_all_single")
        es = input.element_size()
        if not output_split_sizes and not input_split_sizes:
            req = self._comm.all_to_all(_bytes(input, "all_to_all_single"),
                                        _bytes(output, "all_to_all_single"), dtype="uint8")
            return self._wrap("all_to_all_single", [req], [output, input], [output])
        row_in = input[0].numel() if input.dim() > 1 and input.shape[0] else 1
        row_out = output[0].numel() if output.dim() > 1 and output.shape[0] else 1
        ins = list(input_split_sizes) or [input.shape[0] // n] * n
        outs = list(output_split_sizes) or [output.shape[0] // n] * n
        sc = [s * row_in * es for s in ins]
        rc = [s * row_out * es for s in outs]
        sd = [sum(sc[:i]) for i in range(n)]
        rd = [sum(rc[:i]) for i in range(n)]
        req = self._comm.all_to_allv(_bytes(input, "all_to_all_single"), sc, sd,
                                     _bytes(output, "all_to_all_single"), rc, rd, dtype="uint8")
        return self._wrap("all_to_all_single", [req], [output, input], [output])

    def alltoall(self, outputs, inputs, opts=None):
        self._usable("all_to_all")
        n = self.size()
        flat_in = self._flat(inputs, "all_to_all")
        counts_in = [x.numel() * x.element_size() for x in inputs]
        counts_out = [x.numel() * x.element_size() for x in outputs]
        flat_out = self._staging.take(sum(counts_out), device=flat_in.device)
        sd = [sum(counts_in[:i]) for i in range(n)]
        rd = [sum(counts_out[:i]) for i in range(n)]
        req = self._comm.all_to_allv(_bytes(flat_in, "all_to_all"), counts_in, sd,
                                     _bytes(flat_out, "all_to_all"), counts_out, rd,
                                     dtype="uint8")

        def split_out():
            for i, o in enumerate(outputs):
                o.reshape(-1).view(torch.uint8).copy_(flat_out[rd[i]:rd[i] + counts_out[i]])

        return self._wrap("all_to_all", [req], [flat_in, flat_out], outputs, split_out,
                          staged=[flat_in, flat_out])

    def barrier(self, opts=None):
        self._usable("barrier")
        return self._wrap("barrier", [self._comm.barrier()], None, [])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """gloo's: every rank reports to rank 0, which names the ranks that did not within
        timeout (the first one, or with wait_all_ranks every one), then releases them.
        (torch 1.13's dist.monitored_barrier lets only gloo in: call the group's method.)"""
        self._usable("monitored_barrier")
        ms = _ms(timeout) or self._timeout_ms
        me, n = self.rank(), self.size()
        tag = self._internal_tag(_MONITORED)
        if me != 0:
            self._peer(0).send(_bytes(torch.ones(1, dtype=torch.uint8), "monitored_barrier"),
                               tag=tag).wait(ms)
            ack = torch.empty(1, dtype=torch.uint8)
            try:
                self._peer(0).recv(_bytes(ack, "monitored_barrier"), tag=tag).wait(ms)
            except hmc.TimeoutError:
                err = GroupTimeoutError(f"hmc: monitored_barrier: rank {me} was not released "
                                        f"by rank 0 within {ms} ms")
                self._broken = self._broken or err
                raise err from None
            return self._wrap("monitored_barrier", [], None, [])
        start = time.monotonic()
        marks = {r: torch.empty(1, dtype=torch.uint8) for r in range(1, n)}
        reqs = {r: self._peer(r).recv(_bytes(marks[r], "monitored_barrier"), tag=tag)
                for r in range(1, n)}
        missing = []
        for r, q in reqs.items():
            try:
                q.wait(_left(start, ms))
            except hmc.TimeoutError:
                missing.append(r)
                if not wait_all_ranks:
                    break
        if missing:
            err = GroupTimeoutError(
                f"hmc: monitored_barrier: rank{'s' if len(missing) > 1 else ''} "
                f"{', '.join(map(str, missing))} did not reach it within {ms} ms")
            self._broken = self._broken or err
            self._kept.append((marks, reqs))
            raise err
        for r in range(1, n):
            self._peer(r).send(_bytes(marks[r], "monitored_barrier"), tag=tag).wait(ms)
        return self._wrap("monitored_barrier", [], None, [])

    # --- point to point ------------------------------------------------------------------------

    def _check_rank(self, r, what):
        if not 0 <= r < self.size():
            raise ValueError(f"{what}: rank {r} outside the group's 0..{self.size() - 1}")

    def _address(self, other):
        addr = self._addresses.get(other)
        if addr is None:
            addr = bytes.fromhex(self._store.get(f"hmc/address/{other}").decode())
            self._addresses[other] = addr
        return addr

    def _peer(self, other):
        """The hmc peer for the group's rank `other`, connected when first used."""
        self._check_rank(other, "send/recv")
        if other == self.rank():
            raise ValueError(f"hmc: rank {other} cannot send to or receive from itself")
        addr = self._address(other)
        try:
            return _peers.get(self._ctx, addr, self._timeout_ms)
        except hmc.TimeoutError as e:
            err = GroupTimeoutError(f"hmc: connecting rank {self.rank()} to rank {other} of the "
                                    f"group did not end within {self._timeout_ms} ms ({e})")
        except hmc.Error as e:
            err = RuntimeError(f"hmc: connecting rank {self.rank()} to rank {other}: {e}")
        with self._lock:
            if self._broken is None:
                self._broken = err
        raise err

    def _user_tag(self, tag):
        if tag < 0 or tag >= 1 << 31:
            raise ValueError(f"tag {tag} outside 0..{(1 << 31) - 1}")
        return self._tag_base | tag

    def _internal_tag(self, kind):
        return self._tag_base | kind

    def send(self, tensors, dst, tag=0):
        self._usable("send")
        t = tensors[0]
        w = self._wrap(f"send (to rank {dst}, tag {tag})",
                       [self._peer(dst).send(_bytes(t, "send"), tag=self._user_tag(tag))], [t], [t])
        w._ranks = [dst]
        return w

    def recv(self, tensors, src, tag=0):
        self._usable("recv")
        t = tensors[0]
        early = self._stash.get((src, tag))
        if early:
            m = early.popleft()
            t.view(-1).view(torch.uint8)[:m.numel()].copy_(m)
            return self._wrap(f"recv (from rank {src}, tag {tag})", [], None, [t], source=src)
        w = self._wrap(f"recv (from rank {src}, tag {tag})",
                       [self._peer(src).recv(_bytes(t, "recv"), tag=self._user_tag(tag))], [t],
                       [t], source=src)
        w._ranks = [src]
        return w

    def recv_anysource(self, tensors, tag=0):
        """A receive posted to every other rank; the first to end wins, the others are
        cancelled. A message that arrived before its receive could be cancelled is kept for the
        next recv of that rank and tag."""
        self._usable("recv_anysource")
        t = _check(tensors[0], "recv")
        me, n = self.rank(), self.size()
        for r in range(n):
            early = self._stash.get((r, tag))
            if r != me and early:
                m = early.popleft()
                t.view(-1).view(torch.uint8)[:m.numel()].copy_(m)
                return self._wrap(f"recv (from any rank, tag {tag})", [], None, [t], source=r)
        nbytes = t.numel() * t.element_size()
        others = [r for r in range(n) if r != me]
        bufs = {r: torch.empty(nbytes, dtype=torch.uint8) for r in others}
        reqs = {r: self._peer(r).recv(_bytes(bufs[r], "recv"), tag=self._user_tag(tag))
                for r in others}
        got = []  # [winner, its bytes]

        def waiter(left):
            while not got:
                for r, q in reqs.items():
                    if q.done or q.test() is not None:
                        got.append(r)
                        break
                else:
                    if left() <= 1:
                        raise hmc.TimeoutError("no rank sent")
                    time.sleep(0.0002)
            winner = got[0]
            for r, q in list(reqs.items()):
                if r == winner:
                    continue
                try:
                    q.cancel()
                    size = q.wait(left())
                except hmc.CancelledError:
                    del reqs[r]
                    continue
                except hmc.TimeoutError:
                    raise
                except hmc.Error:
                    del reqs[r]  # that rank's failure is not this receive's
                    continue
                del reqs[r]
                self._stash[(r, tag)].append(bufs[r][:size].clone())  # it arrived first: kept
            got.append(reqs[winner].wait(left()))

        waiter.requests = list(reqs.values())

        def then():
            t.view(-1).view(torch.uint8)[:got[1]].copy_(bufs[got[0]][:got[1]])

        w = self._wrap(f"recv (from any rank, tag {tag})", [], [t, bufs, reqs], [t], then,
                       source=lambda: got[0], waiter=waiter)
        w._ranks = others
        return w


# Internal tags of composed collectives, above torch's 31-bit user tags.
_GATHER = 1 << 31
_SCATTER = (1 << 31) + 1
_MONITORED = (1 << 31) + 2


def _create(store, rank, size, timeout):
    return ProcessGroupHmc(store, rank, size, timeout)


if not hasattr(dist.Backend, "HMC"):  # imported once per process, whatever the module's name
    dist.Backend.register_backend("hmc", _create)

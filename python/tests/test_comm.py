"""hmc.Communicator: three ranks as processes on this host, joined at a rendezvous store that
rank 0 hosts, running every collective on numpy arrays; results checked exactly."""

import sys
import textwrap

from conftest import free_port, run_ranks

RANKS = 3

# One rank: joins, runs each collective, checks it against what every rank's inputs imply.
RANK_MAIN = textwrap.dedent(
    """
    import sys
    import numpy as np
    import hmc

    T = 20000
    ctx = hmc.Context()
    comm = hmc.Communicator(ctx, timeout_ms=T)
    r, n = comm.rank, comm.size
    assert n == int(sys.argv[1]), (n, sys.argv[1])

    comm.barrier().wait(T)

    # all-reduce, sum and max, int32 exactly; float32 in place.
    x = (np.arange(1000, dtype=np.int32) * (r + 1))
    out = np.empty_like(x)
    comm.all_reduce(x, out).wait(T)
    assert (out == np.arange(1000, dtype=np.int32) * sum(range(1, n + 1))).all()
    comm.all_reduce(x, out, op="max").wait(T)
    assert (out == np.arange(1000, dtype=np.int32) * n).all()
    f = np.full(257, float(r), dtype=np.float32)
    comm.all_reduce(f).wait(T)
    assert (f == float(sum(range(n)))).all()

    # reduce to the last rank: into recv there; in place there (recv None); the others' send
    # unchanged, their recv (given or None) never written.
    root = n - 1
    got = np.full(1000, -1, dtype=np.int32)
    comm.reduce(x, got if r == root or r % 2 else None, root=root).wait(T)
    assert (x == np.arange(1000, dtype=np.int32) * (r + 1)).all()
    if r == root:
        assert (got == np.arange(1000, dtype=np.int32) * sum(range(1, n + 1))).all(), got[:4]
    else:
        assert (got == -1).all()
    y = np.full(300, float(r + 1), dtype=np.float64)
    comm.reduce(y, op="max", root=root).wait(T)
    assert (y == (float(n) if r == root else float(r + 1))).all(), y[:4]

    # Bitwise, exact on integers (each rank sets bit r, clears bit 8 + r); refused on floats.
    import functools, operator
    mine = np.array([1 << r, ~(1 << (8 + r)), (r + 1) * 0x1010101], dtype=np.int64)
    every = [np.array([1 << k, ~(1 << (8 + k)), (k + 1) * 0x1010101], dtype=np.int64)
             for k in range(n)]
    for op, f_ in (("band", operator.and_), ("bor", operator.or_), ("bxor", operator.xor)):
        for dt in (np.int8, np.uint8, np.int32, np.int64):
            got = np.empty(3, dtype=dt)
            comm.all_reduce(mine.astype(dt), got, op=op).wait(T)
            want = functools.reduce(f_, [e.astype(dt) for e in every])
            assert (got == want).all(), (op, dt, got, want)
    try:
        comm.all_reduce(np.ones(4, dtype=np.float32), op="bxor")
        raise SystemExit("bxor of float32 was accepted")
    except hmc.InvalidArgumentError as e:
        assert "integer" in str(e) and "float32" in str(e), e

    # A stream orders device work: with host buffers it is refused before anything is posted.
    try:
        comm.all_reduce(np.ones(4, dtype=np.float32), stream=0x1000)
        raise SystemExit("a stream with host buffers was accepted")
    except hmc.InvalidArgumentError as e:
        assert "host memory" in str(e), e

    # Awaited from asyncio: a collective's end rings the context's event descriptor too.
    import asyncio
    async def reduce_async():
        y = np.full(64, r + 1, dtype=np.int64)
        await comm.all_reduce(y)
        return y
    y = asyncio.run(reduce_async())
    assert (y == sum(range(1, n + 1))).all()

    # broadcast from the last rank.
    b = np.full(33, r, dtype=np.int64)
    comm.broadcast(b, root=n - 1).wait(T)
    assert (b == n - 1).all()

    # all-gather: rank order.
    g = np.empty(5 * n, dtype=np.uint8)
    comm.all_gather(np.full(5, r, dtype=np.uint8), g).wait(T)
    assert (g == np.repeat(np.arange(n, dtype=np.uint8), 5)).all()

    # all-to-all: block j of rank r holds 10 * r + j; rank r receives 10 * j + r from rank j.
    s = np.repeat(np.array([10 * r + j for j in range(n)], dtype=np.int32), 4)
    a = np.empty_like(s)
    comm.all_to_all(s, a).wait(T)
    assert (a == np.repeat(np.array([10 * j + r for j in range(n)], dtype=np.int32), 4)).all()

    # all-to-all-v: rank r sends j + 1 elements of value 100 * r + j to rank j (rank 0 sends
    # nothing to rank 1: a zero count).
    sc = [0 if (r == 0 and j == 1) else j + 1 for j in range(n)]
    sd = [sum(sc[:j]) for j in range(n)]
    send = np.concatenate([np.full(sc[j], 100 * r + j, dtype=np.int64) for j in range(n)])
    rc = [0 if (j == 0 and r == 1) else r + 1 for j in range(n)]
    rd = [sum(rc[:j]) for j in range(n)]
    recv = np.full(sum(rc), -1, dtype=np.int64)
    comm.all_to_allv(send, sc, sd, recv, rc, rd).wait(T)
    want = np.concatenate([np.full(rc[j], 100 * j + r, dtype=np.int64) for j in range(n)])
    assert (recv == want).all(), (recv, want)

    # reduce-scatter: every rank contributes ones; block r of the sum is n everywhere.
    rs = np.empty(7, dtype=np.float64)
    comm.reduce_scatter(np.ones(7 * n, dtype=np.float64), rs).wait(T)
    assert (rs == float(n)).all()

    # bfloat16 has no buffer format: named.
    bf = np.full(16, 0x3F80, dtype=np.uint16)  # 1.0
    comm.all_reduce(bf, dtype="bfloat16").wait(T)
    assert (bf == {1: 0x3F80, 2: 0x4000, 3: 0x4040}[n]).all()

    # Errors before anything is sent.
    try:
        comm.all_reduce(np.zeros(3, dtype=np.complex64))
        raise SystemExit("a complex buffer was accepted")
    except hmc.InvalidArgumentError:
        pass
    try:
        comm.all_reduce(x, out, op="median")
        raise SystemExit("op median was accepted")
    except hmc.InvalidArgumentError:
        pass

    # split: even and odd ranks.
    sub = comm.split(r % 2, key=-r)
    assert sub.size == len(range(r % 2, n, 2))
    z = np.array([r], dtype=np.int32)
    sub.all_reduce(z).wait(T)
    assert z[0] == sum(range(r % 2, n, 2))
    assert comm.member(0)["pid"] > 0
    comm.barrier().wait(T)
    sub.destroy()
    comm.destroy()
    ctx.close()
    print("rank", r, "ok")
    """
)


def test_every_collective_on_three_ranks():
    port = free_port()
    run_ranks([sys.executable, "-c", RANK_MAIN, str(RANKS)], RANKS,
              lambda r: {"HMC_RANK": str(r), "HMC_WORLD_SIZE": str(RANKS),
                         "HMC_RENDEZVOUS": f"tcp://127.0.0.1:{port}"},
              timeout=90)

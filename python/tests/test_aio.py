"""asyncio: awaiting requests and notifications on the context's event descriptor (hmc.aio),
between two contexts of this process."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hmc
import hmc.aio

T = 10000


def connected():
    a, b = hmc.Context(), hmc.Context()
    with ThreadPoolExecutor(1) as pool:
        accepted = pool.submit(b.accept, T)
        pa = a.connect(b.address(), T)
        pb = accepted.result()
    return a, b, pa, pb


@pytest.fixture
def two():
    a, b, pa, pb = connected()
    yield a, b, pa, pb
    a.close()
    b.close()


def test_awaiting_many_receives_on_one_context(two):
    a, b, pa, pb = two
    n = 64
    bufs = [np.zeros(16, np.uint32) for _ in range(n)]

    async def main():
        recvs = [pb.recv(bufs[i], tag=100 + i) for i in range(n)]
        waiting = [asyncio.ensure_future(r) for r in recvs]  # `await request` is hmc.aio.wait
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiting)  # nothing sent yet: nothing woke them
        for i in reversed(range(n)):  # the last awaiter's message first
            await pa.send(np.full(16, i, np.uint32), tag=100 + i)
        return await asyncio.wait_for(asyncio.gather(*waiting), 20)

    got = asyncio.run(main())
    assert got == [64] * n
    for i, buf in enumerate(bufs):
        assert (buf == i).all()


def test_a_timeout_leaves_the_request_running(two):
    a, b, pa, pb = two
    buf = bytearray(8)

    async def main():
        req = pb.recv(buf, tag=7)
        with pytest.raises(asyncio.TimeoutError):
            await hmc.aio.wait(req, timeout=0.1)
        assert req.test() is None
        await pa.send(b"12345678", tag=7)
        return await hmc.aio.wait(req, timeout=10)

    assert asyncio.run(main()) == 8
    assert bytes(buf) == b"12345678"


def test_awaiting_a_notification(two):
    a, b, pa, pb = two
    target = np.zeros(4096, np.uint8)

    async def main():
        region = b.register(target)
        remote = pa.import_remote(region.pack())
        waiter = asyncio.ensure_future(hmc.aio.notification(b, timeout=10))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await pa.put(np.full(4096, 9, np.uint8), remote, 0, notify=1234)
        note = await waiter
        region.deregister()
        return note

    note = asyncio.run(main())
    assert note.value == 1234
    assert (target == 9).all()


def test_a_lost_peer_raises_from_the_await():
    a, b, pa, pb = connected()
    try:
        async def main():
            req = pb.recv(bytearray(8), tag=1)
            waiter = asyncio.ensure_future(req)
            await asyncio.sleep(0.05)
            a.close()  # the sender's side goes away
            await asyncio.wait_for(waiter, 20)

        with pytest.raises(hmc.PeerLostError) as e:
            asyncio.run(main())
        assert e.value.status == "HMC_ERR_PEER_LOST"
    finally:
        a.close()
        b.close()


def test_closing_the_context_ends_its_awaits():
    a, b, pa, pb = connected()
    try:
        async def main():
            waiter = asyncio.ensure_future(pb.recv(bytearray(8), tag=1))
            notes = asyncio.ensure_future(hmc.aio.notification(b))
            await asyncio.sleep(0.05)
            b.close()
            done, pending = await asyncio.wait([waiter, notes], timeout=10)
            assert not pending, "an await outlived its context"
            return [f.exception() for f in done]

        errors = asyncio.run(main())
        assert len(errors) == 2 and all(e is not None for e in errors)
    finally:
        a.close()
        b.close()


def test_without_a_progress_thread_it_says_why():
    with hmc.Context(progress_thread=False) as ctx:
        with pytest.raises(hmc.NotSupportedError, match="progress thread"):
            ctx.event_fd()

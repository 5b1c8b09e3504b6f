"""Transfers between this process and a second Python process (peer_process.py)."""

import contextlib
import os
import time

import numpy as np
import pytest

import hmc
from peer_process import pattern

TIMEOUT_MS = 20000
REGION = 1 << 20


def connect(ctx, peer_process):
    return ctx.connect(peer_process.address, TIMEOUT_MS)


def import_region(peer):
    desc = bytearray(hmc.ADDRESS_MAX)
    n = peer.recv(desc, tag=1).wait(TIMEOUT_MS)
    return peer.import_remote(bytes(desc[:n]))


def connect_to_region(ctx, target):
    """The peer of a "region" target, and the region it offers."""
    peer = connect(ctx, target)
    return peer, import_region(peer)


def let_exit(peer):
    """Tells the peer process that the test is done with it (tag 9)."""
    peer.send(b"x", tag=9).wait(TIMEOUT_MS)


@contextlib.contextmanager
def region_session(spawn):
    """A "region" target, a context, the peer and the region it offers; when the test is done
    with them the target is let go and must exit cleanly."""
    target = spawn("region", REGION)
    with hmc.Context() as ctx:
        peer, remote = connect_to_region(ctx, target)
        yield target, ctx, peer, remote
        let_exit(peer)
    assert target.finish() == 0


def test_send_recv_numpy_byte_exact(spawn):
    echo = spawn("echo")
    with hmc.Context() as ctx:
        peer = connect(ctx, echo)
        data = np.random.default_rng(1).standard_normal(100_000).astype(np.float32)
        back = np.empty_like(data)
        received = peer.recv(back, tag=3)
        peer.send(np.array([data.nbytes], np.uint64), tag=1).wait(TIMEOUT_MS)
        assert peer.send(data, tag=2).wait(TIMEOUT_MS) == data.nbytes
        assert received.wait(TIMEOUT_MS) == data.nbytes
        assert back.tobytes() == data.tobytes()
        info = peer.info()
        assert info["same_host"] and info["path"] and info["remote_address"]
        assert info["direct_transfers"] == 0 and isinstance(info["device_memory"], str)
        let_exit(peer)
    assert echo.finish() == 0


def test_put_get_with_notification(spawn):
    with region_session(spawn) as (target, ctx, peer, remote):
        assert remote.size == REGION
        data = np.random.default_rng(2).integers(0, 256, 65536, dtype=np.uint8)
        assert peer.put(data, remote, 4096, notify=42).wait(TIMEOUT_MS) == data.nbytes
        assert target.line() == "notify 42"
        back = np.zeros_like(data)
        peer.get(back, remote, 4096).wait(TIMEOUT_MS)
        assert back.tobytes() == data.tobytes()
        # Around the put, the target's memory is as it was.
        edge = bytearray(4096)
        peer.get(edge, remote, 0).wait(TIMEOUT_MS)
        assert bytes(edge) == pattern(REGION)[:4096].tobytes()
        with pytest.raises(hmc.OutOfBoundsError) as e:
            peer.get(bytearray(16), remote, REGION - 8)
        assert e.value.status == "HMC_ERR_OUT_OF_BOUNDS"


def test_transfer_list_reads_scattered_blocks(spawn):
    block = 4096
    blocks = REGION // block
    with region_session(spawn) as (target, ctx, peer, remote):
        local = np.zeros(REGION, np.uint8)
        region = ctx.register(local, 0)
        # Block i of the local region gets the target's block order[i], out of order, as a
        # KV-cache read by block id does.
        order = np.random.default_rng(3).permutation(blocks)[:200]
        descs = np.zeros((len(order), 3), np.uint64)
        descs[:, 0] = np.arange(len(order)) * block
        descs[:, 1] = order * block
        descs[:, 2] = block
        expected = pattern(REGION).reshape(blocks, block)[order].reshape(-1)
        with ctx.prepare(region, remote, "read", descs) as reads:
            assert (reads.count, reads.total, reads.op) == (len(order), len(order) * block, "read")
            assert reads.post(notify=77).wait(TIMEOUT_MS) == reads.total
            assert target.line() == "notify 77"
            assert local[: expected.size].tobytes() == expected.tobytes()
            assert not local[expected.size:].any()
            # Posted again, the same list moves the same blocks.
            local[:] = 0
            assert reads.post().wait(TIMEOUT_MS) == reads.total
            assert local[: expected.size].tobytes() == expected.tobytes()
        # A list of tuples, writing this time.
        writes = peer.prepare(region, remote, "write", [(0, 8192, 100), (100, 0, 50)])
        writes.post().wait(TIMEOUT_MS)
        check = bytearray(150)
        peer.get(memoryview(check)[:100], remote, 8192).wait(TIMEOUT_MS)
        peer.get(memoryview(check)[100:], remote, 0).wait(TIMEOUT_MS)
        assert bytes(check) == local[:150].tobytes()
        # One descriptor out of bounds refuses the whole list, before anything moves.
        local[:] = 0
        bad = descs.copy()
        bad[-1, 1] = REGION - block // 2
        with pytest.raises(hmc.OutOfBoundsError) as e:
            ctx.prepare(region, remote, "read", bad)
        assert e.value.status == "HMC_ERR_OUT_OF_BOUNDS" and e.value.code == -3
        assert f"descriptor {len(order) - 1}" in str(e.value)
        assert not local.any()


def test_peer_killed_during_a_transfer_raises_peer_lost(spawn):
    target = spawn("region", REGION)
    with hmc.Context() as ctx:
        peer, remote = connect_to_region(ctx, target)
        local = np.zeros(REGION, np.uint8)
        region = ctx.register(local, 0)
        reads = ctx.prepare(region, remote, "read",
                            [(i * 1024, (i * 4096) % REGION, 1024) for i in range(1024)])
        never = peer.recv(bytearray(8), tag=5)
        target.proc.kill()
        start = time.monotonic()
        # The posts racing the kill either finish or end with the peer's loss; the receive,
        # which nothing answers, must end with it.
        for _ in range(50):
            try:
                reads.post().wait(TIMEOUT_MS)
            except hmc.PeerLostError:
                break
            except hmc.Error as e:  # refused at post once the peer is known lost
                assert e.status in ("HMC_ERR_PEER_LOST", "HMC_ERR_INVALID_HANDLE"), e
                break
        with pytest.raises(hmc.PeerLostError) as e:
            never.wait(TIMEOUT_MS)
        assert e.value.status == "HMC_ERR_PEER_LOST"
        assert isinstance(e.value, ConnectionError)
        assert time.monotonic() - start < 10
        assert not peer.info()["alive"]
    target.finish()

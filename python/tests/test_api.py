"""The package within one process: errors, buffers and their lifetimes, Ctrl-C during waits,
closing, device memory of the emulated CUDA runtime."""

import gc
import os
import signal
import threading
import time
import weakref

import numpy as np
import pytest

import hmc


def test_errors_carry_status_and_message(pair):
    pa, pb, a, b = pair
    with pytest.raises(hmc.Error) as e:
        a.alloc("nosuch:0", 64)
    assert e.value.status == "HMC_ERR_NOT_FOUND" and e.value.code == -5
    assert "nosuch:0" in str(e.value)
    with pytest.raises(hmc.InvalidArgumentError) as e:
        pa.send(b"x", tag=hmc.TAG_MAX)
    assert e.value.status == "HMC_ERR_INVALID_ARGUMENT" and isinstance(e.value, ValueError)
    with pytest.raises(hmc.InvalidArgumentError, match="writable"):
        pb.recv(b"read-only")
    with pytest.raises(hmc.InvalidArgumentError, match="contiguous"):
        pa.send(np.zeros((4, 4))[:, 1])
    with pytest.raises(hmc.InvalidArgumentError, match="not a buffer"):
        pa.send("text")
    with pytest.raises(hmc.InvalidArgumentError):
        pa.send((1, -1))
    with pytest.raises(hmc.InvalidArgumentError, match="timeout"):
        a.notify_wait(-2)


def test_reprs_say_what_each_object_is(pair):
    pa, pb, a, b = pair
    assert repr(a) == "<hmc.Context, 1 peer>"
    assert repr(pa).startswith(f"<hmc.Peer pid {os.getpid()} on ") and " via " in repr(pa)
    buf = np.zeros(32, dtype=np.uint8)
    region = a.register(buf)
    assert repr(region) == f"<hmc.Region 32 bytes at {hex(buf.ctypes.data)}>"
    region.deregister()
    assert repr(region) == "<hmc.Region deregistered>"
    r = pb.recv(bytearray(8), tag=41)
    assert repr(r) == "<hmc.Request hmc_recv, pending>"
    pa.send(b"12345", tag=41).wait(5000)
    r.wait(5000)
    assert repr(r) == "<hmc.Request hmc_recv, done, 5 bytes>"
    c = hmc.Context()
    c.close()
    assert repr(c) == "<hmc.Context closed>"


def test_wrong_argument_types_raise_one_line_type_errors(pair):
    pa, pb, a, b = pair
    cases = [
        (lambda: pa.send(b"x", tag="seven"), "Peer.send(): argument 'tag' must be int, not str"),
        (lambda: a.alloc(0, 16), "Context.alloc(): argument 'device' must be str, not int"),
        (lambda: a.accept(timeout_ms=0.5),
         "Context.accept(): argument 'timeout_ms' must be int, not float"),
        (lambda: hmc.Communicator(a, rank="0"), "Communicator(): argument 'rank' must be int, not str"),
        (lambda: a.alloc("host"), "Context.alloc(): argument 'size' is missing (it takes device, size)"),
        (lambda: a.accept(wait=1), "Context.accept(): no argument 'wait' (it takes timeout_ms=...)"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == message


def test_transfer_list_arguments(pair):
    pa, pb, a, b = pair
    target = np.zeros(4096, np.uint8)
    target_region = b.register(target)  # registered while the object lives
    remote = pa.import_remote(target_region.pack())
    region = a.register(np.zeros(4096, np.uint8), 0)
    with pytest.raises(hmc.InvalidArgumentError, match="op must be"):
        a.prepare(region, remote, "sideways", [(0, 0, 8)])
    with pytest.raises(hmc.InvalidArgumentError, match="shape"):
        a.prepare(region, remote, "read", np.zeros((2, 2), np.uint64))
    with pytest.raises(hmc.InvalidArgumentError, match="negative"):
        a.prepare(region, remote, "read", np.array([[0, -8, 8]], np.int64))
    with pytest.raises(hmc.InvalidArgumentError, match="descriptor 1"):
        a.prepare(region, remote, "read", [(0, 0, 8), (0, 0)])
    with pytest.raises(hmc.InvalidArgumentError, match="count is 0"):
        a.prepare(region, remote, "read", [])
    with pytest.raises(hmc.InvalidArgumentError, match="read-only"):
        a.prepare(a.register(bytes(64), hmc.ACCESS_REMOTE_READ), remote, "read", [(0, 0, 8)])
    with pytest.raises(hmc.OutOfBoundsError):
        a.prepare(region, remote, "write", [(4090, 0, 8)])
    # int64 arrays, numpy's default, are taken as they are.
    target[:16] = np.arange(16)
    local = np.zeros(16, np.uint8)
    reads = a.prepare(a.register(local, 0), remote, "read", np.array([[0, 8, 8], [8, 0, 8]]))
    reads.post().wait()
    assert list(local) == list(range(8, 16)) + list(range(8))
    reads.release()
    with pytest.raises(hmc.InvalidHandleError):
        reads.post()


def test_request_timeout_leaves_it_pending_then_cancel(pair):
    pa, pb, a, b = pair
    r = pb.recv(bytearray(8), tag=11)
    start = time.monotonic()
    with pytest.raises(hmc.TimeoutError) as e:
        r.wait(150)
    assert 0.1 < time.monotonic() - start < 2
    assert isinstance(e.value, TimeoutError) and e.value.status == "HMC_ERR_TIMEOUT"
    assert r.test() is None and not r.done
    assert r.cancel()
    with pytest.raises(hmc.CancelledError):
        r.wait(1000)
    assert r.done
    with pytest.raises(hmc.CancelledError):  # the outcome stays
        r.test()


def test_request_holds_its_buffer(pair):
    pa, pb, a, b = pair
    into = np.zeros(64, np.uint8)
    alive = weakref.ref(into)
    r = pb.recv(into, tag=12)
    del into
    gc.collect()
    assert alive() is not None
    grow = bytearray(8)
    r2 = pb.recv(grow, tag=13)
    with pytest.raises(BufferError):  # cannot be resized under the receive
        grow.extend(b"more")
    pa.send(np.arange(64, dtype=np.uint8), tag=12).wait()
    pa.send(b"12345678", tag=13).wait()
    assert r.wait(5000) == 64 and r2.wait(5000) == 8
    assert alive() is None
    grow.extend(b"more")
    assert bytes(grow) == b"12345678more"


def test_dropping_a_pending_request_cancels_it(pair):
    pa, pb, a, b = pair
    pb.recv(bytearray(8), tag=14)  # dropped at once: cancelled, so it takes no message
    after = bytearray(8)
    r = pb.recv(after, tag=14)
    pa.send(b"abcdefgh", tag=14).wait()
    assert r.wait(5000) == 8 and bytes(after) == b"abcdefgh"


@pytest.fixture
def sigint_raises():
    """Ctrl-C raising KeyboardInterrupt, as in an interactive Python, even where this process
    was started with SIGINT ignored (a background job of a shell)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupt_after(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_interrupts_waits_and_leaves_all_usable(pair, sigint_raises):
    pa, pb, a, b = pair
    for wait in (lambda: b.notify_wait(20000), lambda: b.accept(20000)):
        interrupt_after(0.2)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            wait()
        assert time.monotonic() - start < 5
    with pytest.raises(hmc.TimeoutError):
        b.notify_wait(0)
    into = bytearray(4)
    r = pb.recv(into, tag=15)
    interrupt_after(0.2)
    with pytest.raises(KeyboardInterrupt):
        r.wait(20000)
    assert not r.done
    pa.send(b"late", tag=15).wait()
    assert r.wait(5000) == 4 and bytes(into) == b"late"


def test_close_ends_everything(pair):
    a, b = hmc.Context(), hmc.Context()
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:
        accepted = pool.submit(b.accept, 10000)
        pa = a.connect(b.address(), 10000)
        pb = accepted.result()
    r = pb.recv(bytearray(8), tag=1)
    waiter = ThreadPoolExecutor(1).submit(r.wait, 20000)
    time.sleep(0.1)
    b.close()  # with another thread waiting on one of its requests
    with pytest.raises(hmc.CancelledError):
        waiter.result(5)
    assert b.closed and pb.closed
    with pytest.raises(hmc.InvalidHandleError, match="context was closed"):
        pb.send(b"x")
    with pytest.raises(hmc.InvalidHandleError):
        b.address()
    pa.close()
    with pytest.raises(hmc.InvalidHandleError, match="peer was closed"):
        pa.send(b"x")
    a.close()
    a.close()  # once is enough, twice is harmless


def test_memory_and_raw_pointers(pair):
    pa, pb, a, b = pair
    with a.alloc("host", 256) as mem:
        assert mem.size == 256 and mem.device == "host" and mem.ptr
        a.copy(mem, np.arange(256, dtype=np.uint8))
        out = np.zeros(256, np.uint8)
        r = pb.recv(out, tag=16)
        pa.send((mem.ptr + 128, 128), tag=16).wait()
        assert r.wait(5000) == 128
        assert list(out[:128]) == list(range(128, 256))
        r = pb.recv(mem, tag=17)
        with pytest.raises(hmc.InvalidArgumentError, match="pending"):
            mem.free()
        pa.send(bytes(256), tag=17).wait()
        r.wait(5000)
    with pytest.raises(hmc.InvalidHandleError):
        pa.send(mem)


@pytest.mark.skipif(not os.environ.get("HMC_CUDA_LIBRARY"),
                    reason="needs the emulated CUDA runtime (HMC_CUDA_LIBRARY), set by ctest")
def test_emulated_device_memory():
    from concurrent.futures import ThreadPoolExecutor
    with hmc.Context() as a, hmc.Context() as b:
        assert any(d["name"] == "cuda:0" for d in a.devices())
        with ThreadPoolExecutor(1) as pool:
            accepted = pool.submit(b.accept, 10000)
            pa = a.connect(b.address(), 10000)
            pb = accepted.result()
        data = np.random.default_rng(4).integers(0, 256, 1 << 20, dtype=np.uint8)
        src, dst = a.alloc("cuda:0", data.nbytes), b.alloc("cuda:0", data.nbytes)
        a.copy(src, data)
        r = pb.recv(dst, tag=1)
        pa.send(src, tag=1).wait(10000)
        assert r.wait(10000) == data.nbytes
        back = np.zeros_like(data)
        b.copy(back, dst)
        assert back.tobytes() == data.tobytes()
        # Device memory as the target of a put, by its raw pointer.
        dst_region = b.register((dst.ptr, dst.size))
        remote = pa.import_remote(dst_region.pack())
        pa.put(np.full(4096, 7, np.uint8), remote, 0, notify=1).wait(10000)
        assert b.notify_wait(10000).value == 1
        b.copy(back, dst)
        assert (back[:4096] == 7).all() and back[4096:].tobytes() == data[4096:].tobytes()


class TensorLike:
    """What a torch tensor offers hmc: __dlpack__, and no buffer protocol."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_tensors_and_capsules(pair):
    pa, pb, a, b = pair
    data = np.arange(1000, dtype=np.float64).reshape(10, 100)
    into = np.zeros_like(data)
    r = pb.recv(TensorLike(into), tag=18)
    assert pa.send(data.__dlpack__(), tag=18).wait() == data.nbytes
    assert r.wait(5000) == data.nbytes
    assert into.tobytes() == data.tobytes()
    # A pending request holds the capsule, which holds the tensor.
    held = np.zeros(8)
    alive = weakref.ref(held)
    r = pb.recv(TensorLike(held), tag=18)
    del held
    gc.collect()
    assert alive() is not None
    pa.send(bytes(64), tag=18).wait()
    r.wait(5000)
    gc.collect()
    assert alive() is None
    with pytest.raises(hmc.InvalidArgumentError, match="not contiguous"):
        pa.send(TensorLike(data[:, ::2]))
    first = np.zeros(10)
    a.copy(first, data.__dlpack__(), 80)
    assert list(first) == list(range(10))
    # A capsule a consumer took is no buffer any more.
    class Kept(TensorLike):
        def __dlpack__(self, stream=None):
            self.capsule = self.array.__dlpack__()
            return self.capsule

    taken = Kept(data)
    np.from_dlpack(taken)
    with pytest.raises(hmc.InvalidArgumentError, match="not a buffer"):
        pa.send(taken.capsule)


def test_metrics_count_the_transfers(pair):
    pa, pb, a, b = pair

    def value(ctx, prefix, has):
        got = [l for l in ctx.metrics().splitlines() if l.startswith(prefix) and has in l]
        assert len(got) == 1, got  # one peer
        return int(got[0].rsplit(" ", 1)[1])

    assert a.metrics().startswith("# HELP hmc_build_info")
    sent = value(a, "hmc_transfer_bytes_total{", 'op="send"')
    received = value(b, "hmc_transfers_total{", 'op="recv",result="completed"')
    send = np.arange(1024, dtype=np.uint8)
    recv = np.zeros(1024, dtype=np.uint8)
    r = pb.recv(recv, tag=3)
    pa.send(send, tag=3).wait(10000)
    r.wait(10000)
    assert value(a, "hmc_transfer_bytes_total{", 'op="send"') == sent + 1024
    assert value(b, "hmc_transfers_total{", 'op="recv",result="completed"') == received + 1

"""hmc.Memory as a producer: the buffer protocol over host memory, DLPack over host, CUDA and
HIP memory, and the lifetimes of both exports (free() and the context's close() are refused
while one is alive, so no view ever shows freed memory)."""

import gc
import os

import numpy as np
import pytest

import hmc

KDL_CPU, KDL_CUDA, KDL_ROCM = 1, 2, 10


@pytest.fixture
def ctx():
    c = hmc.Context(progress_thread=False)
    yield c
    gc.collect()
    c.close()


def device_names(c):
    return {d["name"] for d in c.devices()}


# --- The buffer protocol -----------------------------------------------------------------------

def test_memoryview_is_writable_bytes_over_all_of_it(ctx):
    m = ctx.alloc("host", 64)
    v = memoryview(m)
    assert (v.format, v.itemsize, v.ndim, v.shape, v.nbytes, v.readonly) == (
        "B", 1, 1, (64,), 64, False)
    v[:5] = b"hello"
    back = bytearray(64)
    ctx.copy(back, m)  # hmc reads what Python wrote
    assert back[:5] == b"hello"
    v.release()


def test_numpy_frombuffer_shares_the_memory(ctx):
    m = ctx.alloc("host", 16)
    a = np.frombuffer(m, np.uint8)
    assert a.size == 16 and a.flags.writeable
    ctx.copy(m, np.arange(16, dtype=np.uint8))
    assert a.tolist() == list(range(16))
    a[:] = 7
    back = bytearray(16)
    ctx.copy(back, m)
    assert back == bytes([7] * 16)
    floats = np.frombuffer(m, np.float32)  # any dtype over the bytes
    assert floats.size == 4


def test_free_is_refused_while_a_view_is_alive(ctx):
    m = ctx.alloc("host", 8)
    v = memoryview(m)
    with pytest.raises(hmc.InvalidArgumentError, match="1 buffer view"):
        m.free()
    v.release()
    a = np.frombuffer(m, np.uint8)
    with pytest.raises(hmc.InvalidArgumentError, match="buffer view"):
        m.free()
    del a
    gc.collect()
    m.free()
    assert m.ptr == 0


def test_freed_memory_refuses_the_buffer_protocol(ctx):
    m = ctx.alloc("host", 8)
    m.free()
    with pytest.raises(hmc.InvalidHandleError, match="freed"):
        memoryview(m)
    with pytest.raises(hmc.InvalidHandleError, match="freed"):
        np.frombuffer(m, np.uint8)


def test_close_is_refused_while_a_view_is_alive():
    c = hmc.Context(progress_thread=False)
    m = c.alloc("host", 8)
    v = memoryview(m)
    with pytest.raises(hmc.InvalidArgumentError, match="closing frees the memory"):
        c.close()
    assert not c.closed
    v[0] = 1  # still valid memory
    v.release()
    c.close()
    assert c.closed
    with pytest.raises(hmc.InvalidHandleError, match="context was closed"):
        memoryview(m)


def test_collectives_still_ask_the_datatype_of_a_memory():
    # The buffer protocol gives host Memory a format ('B'); collectives still want dtype= for a
    # Memory, as before, rather than taking its bytes for uint8.
    from conftest import free_port

    with hmc.Context() as c:
        comm = hmc.Communicator(c, 0, 1, f"tcp://127.0.0.1:{free_port()}")
        m = c.alloc("host", 8)
        with pytest.raises(hmc.InvalidArgumentError, match="pass dtype="):
            comm.all_reduce(m)
        np.frombuffer(m, np.float32)[:] = 2.0
        comm.all_reduce(m, dtype="float32").wait(10000)
        assert np.frombuffer(m, np.float32).tolist() == [2.0, 2.0]
        del comm
        gc.collect()


# --- DLPack ------------------------------------------------------------------------------------

def test_host_memory_is_a_dlpack_cpu_tensor(ctx):
    m = ctx.alloc("host", 32)
    assert m.__dlpack_device__() == (KDL_CPU, 0)
    a = np.from_dlpack(m)
    assert a.dtype == np.uint8 and a.shape == (32,)
    ctx.copy(m, np.arange(32, dtype=np.uint8))
    assert a.tolist() == list(range(32))  # the same memory, no copy
    with pytest.raises(hmc.InvalidArgumentError, match="DLPack tensor"):
        m.free()
    del a
    gc.collect()
    m.free()


def test_torch_from_dlpack_keeps_the_memory_until_the_tensor_goes(ctx):
    dlpack = pytest.importorskip("torch.utils.dlpack")
    m = ctx.alloc("host", 8)
    t = dlpack.from_dlpack(m)
    assert t.dtype.__str__() == "torch.uint8" and tuple(t.shape) == (8,)
    t[:] = 3
    back = bytearray(8)
    ctx.copy(back, m)
    assert back == bytes([3] * 8)
    with pytest.raises(hmc.InvalidArgumentError, match="DLPack tensor"):
        m.free()
    del t
    gc.collect()
    m.free()


def test_an_unconsumed_capsule_lets_go_when_dropped(ctx):
    m = ctx.alloc("host", 8)
    capsule = m.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    with pytest.raises(hmc.InvalidArgumentError, match="DLPack tensor"):
        m.free()
    del capsule
    gc.collect()
    m.free()


def test_a_capsule_round_trips_through_hmcs_buffer_parsing(pair):
    pa, pb, a, b = pair
    src = a.alloc("host", 64)
    np.frombuffer(src, np.uint8)[:] = np.arange(64, dtype=np.uint8)
    dst = bytearray(64)
    r = pb.recv(dst, tag=41)
    pa.send(src.__dlpack__(), tag=41).wait(10000)  # a "dltensor" capsule as the buffer
    assert r.wait(10000) == 64 and dst == bytes(range(64))
    got = np.zeros(64, np.uint8)
    r = pb.recv(got, tag=42)
    torch = pytest.importorskip("torch")
    pa.send(torch.utils.dlpack.from_dlpack(src), tag=42).wait(10000)  # a consumer's tensor
    assert r.wait(10000) == 64 and got.tolist() == list(range(64))
    gc.collect()
    src.free()


def test_dlpack_of_freed_memory_is_refused(ctx):
    m = ctx.alloc("host", 8)
    m.free()
    with pytest.raises(hmc.InvalidHandleError, match="freed"):
        m.__dlpack__()
    with pytest.raises(hmc.InvalidHandleError, match="freed"):
        m.__dlpack_device__()


def test_dlpack_arguments(ctx):
    m = ctx.alloc("host", 8)
    with pytest.raises(TypeError, match="stream"):
        m.__dlpack__(stream="default")
    with pytest.raises(BufferError, match="never a copy"):
        m.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="device asked for"):
        m.__dlpack__(dl_device=(KDL_CUDA, 0))
    del m  # the refused calls left no export behind: the fixture's close succeeds


def test_close_is_refused_while_a_dlpack_tensor_is_alive():
    c = hmc.Context(progress_thread=False)
    a = np.from_dlpack(c.alloc("host", 8))
    with pytest.raises(hmc.InvalidArgumentError, match="DLPack tensor"):
        c.close()
    del a
    gc.collect()
    c.close()


# --- Device memory -----------------------------------------------------------------------------

@pytest.mark.skipif(not os.environ.get("HMC_CUDA_LIBRARY"),
                    reason="needs the emulated CUDA runtime (HMC_CUDA_LIBRARY)")
def test_cuda_memory_refuses_the_buffer_protocol_and_exports_dlpack(ctx):
    assert "cuda:0" in device_names(ctx)
    m = ctx.alloc("cuda:0", 16)
    with pytest.raises(BufferError, match="cuda:0 is device memory"):
        memoryview(m)
    with pytest.raises(BufferError, match="device memory"):
        np.frombuffer(m, np.uint8)
    assert m.__dlpack_device__() == (KDL_CUDA, 0)
    capsule = m.__dlpack__(stream=1)  # a consumer's stream is taken (nothing to order on it)
    with pytest.raises(hmc.InvalidArgumentError, match="DLPack tensor"):
        m.free()
    del capsule
    m.free()


@pytest.mark.skipif(not os.environ.get("HMC_HIP_LIBRARY"),
                    reason="needs the emulated HIP runtime (HMC_HIP_LIBRARY)")
def test_hip_memory_is_a_rocm_dlpack_device(ctx):
    assert "hip:0" in device_names(ctx)
    m = ctx.alloc("hip:0", 16)
    assert m.__dlpack_device__() == (KDL_ROCM, 0)
    with pytest.raises(BufferError, match="hip:0 is device memory"):
        memoryview(m)
    capsule = m.__dlpack__()
    # hmc's own parsing takes the ROCm capsule: its address is the allocation.
    back = np.zeros(16, np.uint8)
    ctx.copy(m, np.full(16, 9, np.uint8))
    ctx.copy(back, capsule)
    assert back.tolist() == [9] * 16
    del capsule
    m.free()


@pytest.mark.parametrize("kind,var", [("mlu", "HMC_MLU_LIBRARY"), ("musa", "HMC_MUSA_LIBRARY")])
def test_devices_without_a_dlpack_type_are_refused_by_name(ctx, kind, var):
    if not os.environ.get(var):
        pytest.skip(f"needs the emulated {kind} runtime ({var})")
    name = f"{kind}:0"
    assert name in device_names(ctx)
    m = ctx.alloc(name, 16)
    with pytest.raises(BufferError, match=f"{name}: DLPack has no device type for {kind}"):
        m.__dlpack_device__()
    with pytest.raises(BufferError, match=f"{name}: DLPack has no device type"):
        m.__dlpack__()
    with pytest.raises(BufferError, match="device memory"):
        memoryview(m)
    m.free()  # the refusals left no export behind

"""Notifications that carry bytes between two contexts of this process: the forms of notify
(int, bytes-like, (int, bytes)) on Peer.put and TransferList.post, Peer.notify without data,
Notification.data and its repr, the posting order with value-only notifications, the size limit
and wrong types."""

import numpy as np
import pytest

import hmc

TIMEOUT_MS = 20000


@pytest.fixture
def target(pair):
    """A registered region of the target context and the initiator's import of it."""
    pa, pb, a, b = pair
    mem = np.zeros(8192, np.uint8)
    region = b.register(mem)
    yield mem, pa.import_remote(region.pack())
    region.deregister()


def test_every_form_of_notify_on_put(pair, target):
    pa, pb, a, b = pair
    mem, remote = target
    data = np.full(1024, 3, np.uint8)
    forms = [
        (7, 7, b""),
        (b"req-1", 0, b"req-1"),
        (bytearray(b"req-2"), 0, b"req-2"),
        (memoryview(b"req-3"), 0, b"req-3"),
        ((9, b"req-4"), 9, b"req-4"),
        ((10, bytearray(b"")), 10, b""),
    ]
    for notify, value, payload in forms:
        pa.put(data, remote, 512, notify=notify).wait(TIMEOUT_MS)
        n = b.notify_wait(TIMEOUT_MS)
        assert (n.value, n.data) == (value, payload), notify
        assert n.peer is pb
    assert bytes(mem[512:1536]) == bytes(data)


def test_peer_notify_without_data_and_the_repr(pair):
    pa, pb, a, b = pair
    r = pa.notify(5, b"kv:done")
    assert r.wait(TIMEOUT_MS) == 0
    n = b.notify_wait(TIMEOUT_MS)
    assert (n.value, n.data, n.peer) == (5, b"kv:done", pb)
    assert repr(n) == "hmc.Notification(value=5, data=b'kv:done')"
    pa.notify().wait(TIMEOUT_MS)
    n = b.notify_wait(TIMEOUT_MS)
    assert (n.value, n.data) == (0, b"")
    assert repr(n) == "hmc.Notification(value=0, data=b'')"


def test_posting_order_across_puts_lists_and_notifications(pair, target):
    pa, pb, a, b = pair
    mem, remote = target
    src = np.arange(256, dtype=np.uint8)
    with a.prepare(a.register(src, 0), remote, "write", [(0, 4096, 256)]) as writes:
        want, reqs = [], []
        for k in range(20):
            reqs.append(pa.put(src, remote, 0, notify=k * 4))
            want.append((k * 4, b""))
            reqs.append(pa.put(src, remote, 256, notify=(k * 4 + 1, b"put%d" % k)))
            want.append((k * 4 + 1, b"put%d" % k))
            reqs.append(pa.notify(k * 4 + 2, b"alone%d" % k))
            want.append((k * 4 + 2, b"alone%d" % k))
            reqs.append(writes.post(notify=(k * 4 + 3, b"list%d" % k)))
            want.append((k * 4 + 3, b"list%d" % k))
        for r in reqs:
            r.wait(TIMEOUT_MS)
    got = [b.notify_wait(TIMEOUT_MS) for _ in want]
    assert [(n.value, n.data) for n in got] == want
    assert bytes(mem[4096:4352]) == bytes(src)
    with pytest.raises(hmc.TimeoutError):
        b.notify_wait(0)


def test_the_most_bytes_and_one_more(pair, target):
    pa, pb, a, b = pair
    mem, remote = target
    most = bytes(range(256)) * (hmc.NOTIFY_MAX_BYTES // 256)
    assert len(most) == hmc.NOTIFY_MAX_BYTES == 4096
    pa.notify(1, most).wait(TIMEOUT_MS)
    assert b.notify_wait(TIMEOUT_MS).data == most
    with pytest.raises(hmc.InvalidArgumentError, match="HMC_NOTIFY_MAX_BYTES"):
        pa.notify(1, most + b"x")
    with pytest.raises(hmc.InvalidArgumentError, match="HMC_NOTIFY_MAX_BYTES"):
        pa.put(np.zeros(8, np.uint8), remote, 0, notify=most + b"x")
    with pytest.raises(hmc.TimeoutError):
        b.notify_wait(0)


def test_wrong_notify_types_raise_one_line_type_errors(pair, target):
    pa, pb, a, b = pair
    mem, remote = target
    buf = np.zeros(8, np.uint8)
    region = a.register(buf, 0)
    with a.prepare(region, remote, "write", [(0, 0, 8)]) as writes:
        cases = [
            (lambda: pa.put(buf, remote, 0, notify="id"),
             "Peer.put(): argument 'notify' must be int, bytes or (int, bytes), not str"),
            (lambda: pa.put(buf, remote, 0, notify=(b"x", 1)),
             "Peer.put(): argument 'notify' must be int, bytes or (int, bytes), not tuple"),
            (lambda: writes.post(notify=1.5),
             "TransferList.post(): argument 'notify' must be int, bytes or (int, bytes), not float"),
            (lambda: pa.notify("1"), "Peer.notify(): argument 'value' must be int, not str"),
            (lambda: pa.notify(1, "text"), "Peer.notify(): argument 'data' must be bytes, not str"),
        ]
        for call, message in cases:
            with pytest.raises(TypeError) as e:
                call()
            assert str(e.value) == message
    with pytest.raises(hmc.InvalidArgumentError, match="2\\*\\*64"):
        pa.notify(-1)
    with pytest.raises(hmc.TimeoutError):
        b.notify_wait(0)

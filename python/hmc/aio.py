"""Waiting for hmc from asyncio: ``await request``, ``await hmc.aio.wait(request)`` and
``await hmc.aio.notification(context)``.

One reader per context and event loop watches the context's event descriptor
(Context.event_fd). It is the only caller of Context.event_clear: each time the descriptor turns
readable, and each time a new waiter arrives, it clears the descriptor and then tests every
waiter. Testing after clearing means an end that happens after a test still makes the descriptor
readable, so no wake-up is lost however many coroutines wait on one context. The context needs
its progress thread (the default); without it event_fd raises NotSupportedError.
"""

import asyncio
from typing import Callable, Dict, Optional, Tuple

from hmc._hmc import Context, Notification, Request
from hmc._hmc import TimeoutError as _HmcTimeout

__all__ = ["wait", "notification"]


class _Watcher:
    """The reader of one context's event descriptor on one loop, and its waiters."""

    def __init__(self, loop: asyncio.AbstractEventLoop, context: Context) -> None:
        self.loop = loop
        self.context = context
        self.fd = context.event_fd()
        # future -> poll(): the result once ready, raising on failure, or _PENDING.
        self.waiters: Dict[asyncio.Future, Callable[[], object]] = {}
        loop.add_reader(self.fd, self.sweep)

    def add(self, poll: Callable[[], object]) -> asyncio.Future:
        fut = self.loop.create_future()
        self.waiters[fut] = poll
        self.sweep()
        return fut

    def sweep(self, clear: bool = True) -> None:
        if clear:
            self.context.event_clear()
        for fut, poll in list(self.waiters.items()):
            if fut.done():  # cancelled by its awaiter
                del self.waiters[fut]
                continue
            try:
                result = poll()
            except BaseException as e:  # the request's failure, as hmc raised it
                del self.waiters[fut]
                fut.set_exception(e)
                continue
            if result is not _PENDING:
                del self.waiters[fut]
                fut.set_result(result)

    def idle(self) -> bool:
        return not self.waiters

    def close(self) -> None:
        self.loop.remove_reader(self.fd)

    def end_all(self) -> None:
        """After the context closed: each waiter ends with what its poll says now."""
        self.sweep(clear=False)
        for fut in self.waiters:
            if not fut.done():
                fut.set_exception(RuntimeError("hmc.aio: the context was closed"))
        self.waiters.clear()


_PENDING = object()
_watchers: Dict[Tuple[int, int], _Watcher] = {}


async def _until(context: Context, poll: Callable[[], object],
                 timeout: Optional[float]) -> object:
    loop = asyncio.get_running_loop()
    key = (id(loop), id(context))
    watcher = _watchers.get(key)
    if watcher is None or watcher.context is not context:
        watcher = _watchers[key] = _Watcher(loop, context)
    fut = watcher.add(poll)
    try:
        if timeout is None:
            return await fut
        return await asyncio.wait_for(fut, timeout)
    finally:
        watcher.waiters.pop(fut, None)
        if watcher.idle() and _watchers.get(key) is watcher:
            del _watchers[key]
            watcher.close()


def _closing(context: Context) -> None:
    """Context.close calls it first: the readers leave the descriptor while it is open."""
    for key, watcher in list(_watchers.items()):
        if watcher.context is context:
            watcher.close()


def _closed(context: Context) -> None:
    """Context.close calls it last: the waiters end (their requests ended with the context)."""
    for key, watcher in list(_watchers.items()):
        if watcher.context is context:
            del _watchers[key]
            watcher.end_all()


async def wait(request: Request, timeout: Optional[float] = None) -> int:
    """Waits for the request's end without blocking the loop; returns the bytes moved.

    Raises the request's failure as hmc.Error (PeerLostError, ...), or asyncio.TimeoutError
    after ``timeout`` seconds (the request then keeps running; cancel it or await it again).
    """
    n = request.test()
    if n is not None:
        return n

    def poll() -> object:
        got = request.test()
        return _PENDING if got is None else got

    return await _until(request.context, poll, timeout)


async def notification(context: Context, timeout: Optional[float] = None) -> Notification:
    """The oldest notification delivered to the context, waiting without blocking the loop."""

    def poll() -> object:
        try:
            return context.notify_wait(0)
        except _HmcTimeout:
            return _PENDING

    got = poll()
    if got is not _PENDING:
        return got  # type: ignore[return-value]
    return await _until(context, poll, timeout)  # type: ignore[return-value]

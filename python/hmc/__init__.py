"""hmc: Heterogeneous Memory Communication, from Python.

Moves data between host memory and the memories of GPUs of any vendor, within a node and across
nodes, over the paths hmc negotiates with each peer. The objects mirror hmc's C API (hmc.h):
Context, Peer, Region, RemoteRegion, TransferList, Request, Memory, and Communicator with its
collectives. Buffers are anything with
the buffer protocol (numpy arrays, bytearray, memoryview), an hmc.Memory, or a (pointer, size)
pair for memory Python does not see. Failures raise hmc.Error (or a subclass), which carries the
status's name (.status) and hmc's message. hmc.route_logging_to_python() hands hmc's log lines
to logging.getLogger("hmc"). See docs/python.md.
"""

import atexit as _atexit

from hmc._hmc import (
    ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
    ADDRESS_MAX,
    NOTIFY_MAX_BYTES,
    TAG_MAX,
    CancelledError,
    Communicator,
    Context,
    Error,
    InvalidArgumentError,
    InvalidHandleError,
    Memory,
    NotSupportedError,
    Notification,
    OutOfBoundsError,
    Peer,
    PeerLostError,
    Region,
    RemoteError,
    RemoteRegion,
    Request,
    TimeoutError,
    TransferList,
    address_from_host,
    version,
)

from hmc import _arguments, _hmc

_arguments.install(_hmc)  # one-line TypeErrors for arguments of the wrong type
_atexit.register(_hmc._at_exit)  # daemon threads still in hmc at exit: no abort (objects.cpp)

__version__ = version()

_LOGGING_STOP_REGISTERED = False


def route_logging_to_python(enabled: bool = True) -> None:
    """Hands hmc's log lines to logging.getLogger("hmc") (True) or back to HMC_LOG_FILE, by
    default standard error (False).

    Levels map to logging's: error ERROR, warn WARNING, info INFO, debug DEBUG, trace 5. Which
    lines hmc makes at all is still HMC_LOG_LEVEL's choice (warn by default), read when a
    Context is created. The lines arrive through a thread of the module, shortly after hmc
    wrote them; at interpreter exit the routing ends (after delivering what was queued) before
    logging shuts down, and hmc's later lines go to HMC_LOG_FILE again.
    """
    global _LOGGING_STOP_REGISTERED
    if enabled and not _LOGGING_STOP_REGISTERED:
        import logging  # noqa: F401  (imported first, so that our atexit runs before its own)

        _atexit.register(_hmc._route_logging, False)
        _LOGGING_STOP_REGISTERED = True
    _hmc._route_logging(bool(enabled))

__all__ = [
    "ACCESS_REMOTE_READ",
    "ACCESS_REMOTE_WRITE",
    "ADDRESS_MAX",
    "NOTIFY_MAX_BYTES",
    "TAG_MAX",
    "CancelledError",
    "Communicator",
    "Context",
    "Error",
    "InvalidArgumentError",
    "InvalidHandleError",
    "Memory",
    "NotSupportedError",
    "Notification",
    "OutOfBoundsError",
    "Peer",
    "PeerLostError",
    "Region",
    "RemoteError",
    "RemoteRegion",
    "Request",
    "TimeoutError",
    "TransferList",
    "address_from_host",
    "route_logging_to_python",
    "version",
]

"""hmc: Heterogeneous Memory Communication, from Python.

Moves data between host memory and the memories of GPUs of any vendor, within a node and across
nodes, over the paths hmc negotiates with each peer. The objects mirror hmc's C API (hmc.h):
Context, Peer, Region, RemoteRegion, TransferList, Request, Memory, and Communicator with its
collectives. Buffers are anything with
the buffer protocol (numpy arrays, bytearray, memoryview), an hmc.Memory, or a (pointer, size)
pair for memory Python does not see. Failures raise hmc.Error (or a subclass), which carries the
status's name (.status) and hmc's message. See docs/python.md.
"""

from hmc._hmc import (
    ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
    ADDRESS_MAX,
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

__version__ = version()

__all__ = [
    "ACCESS_REMOTE_READ",
    "ACCESS_REMOTE_WRITE",
    "ADDRESS_MAX",
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
    "version",
]

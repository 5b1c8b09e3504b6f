"""The other process of the two-process tests. It prints "address <hex>" for the test to
connect to, accepts, then plays its MODE:

  echo              receives an 8-byte size on tag 1, then that many bytes on tag 2, and sends
                    them back on tag 3
  region SIZE       registers SIZE bytes holding pattern(SIZE), sends the region's descriptor
                    on tag 1; then prints "notify <value>" for every notification until a
                    message on tag 9 says to stop
"""

import sys

import numpy as np

import hmc

TIMEOUT_MS = 20000


def pattern(size):
    return (np.arange(size, dtype=np.uint64) * 7 + 3).astype(np.uint8)


def main():
    mode = sys.argv[1]
    with hmc.Context() as ctx:
        print("address", ctx.address().hex(), flush=True)
        peer = ctx.accept(TIMEOUT_MS)
        if mode == "echo":
            size = np.zeros(1, np.uint64)
            peer.recv(size, tag=1).wait(TIMEOUT_MS)
            data = np.empty(int(size[0]), np.uint8)
            peer.recv(data, tag=2).wait(TIMEOUT_MS)
            peer.send(data, tag=3).wait(TIMEOUT_MS)
            # The test's receive tells us the echo arrived: wait for its word before leaving.
            peer.recv(bytearray(1), tag=9).wait(TIMEOUT_MS)
        elif mode == "region":
            memory = pattern(int(sys.argv[2]))
            region = ctx.register(memory)
            peer.send(region.pack(), tag=1).wait(TIMEOUT_MS)
            stop = peer.recv(bytearray(1), tag=9)
            while stop.test() is None:
                try:
                    print("notify", ctx.notify_wait(100).value, flush=True)
                except hmc.TimeoutError:
                    pass
        else:
            raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

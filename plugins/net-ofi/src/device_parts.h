// What the files of Device (device.cpp, completions.cpp, posting.cpp, address_vector.cpp,
// memory.cpp; one concern each) share: the size of a rendezvous read and which errors mean the
// peer is gone. Internal to the plugin.
#pragma once

#include <rdma/fi_errno.h>

#include <cerrno>
#include <cstddef>

namespace hmc::ofi {

// A rendezvous read moves at most this much per operation, one operation per progress call:
// shm copies a read with cross-memory attach inside fi_read itself, so one read of a whole
// 1 GiB message held progress (the core's heartbeats, every other peer) for seconds, and a
// sender that died in the middle went unnoticed until the copy ended.
constexpr size_t kReadChunk = size_t{8} << 20;

// Errors that mean the remote process or the path to it is gone.
inline bool peer_error(int err) {
  switch (err) {
    case FI_EIO:
    case FI_ENOTCONN:
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ETIMEDOUT:
    case FI_EHOSTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ESHUTDOWN:
    case FI_EADDRNOTAVAIL:
    case EPIPE:
    case EREMOTEIO: return true;
    default: return false;
  }
}

}  // namespace hmc::ofi

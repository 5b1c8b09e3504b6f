// The objects of the Python package, over the C API of hmc.h. Lifetimes, all enforced here:
//  - Every object holds its context (Core) alive, so the context is destroyed after the last of
//    them, or by an explicit Context.close(), after which they all refuse to be used.
//  - A Request holds its buffer (Pinned) and its Peer; a TransferList holds its Region and
//    RemoteRegion; a Region holds its memory; a RemoteRegion holds its Peer. Dropping a pending
//    Request cancels it and waits for it to end, so no memory is freed under hmc.
//  - Calls that block release the GIL and wait in slices, checking for signals between them, so
//    Ctrl-C raises KeyboardInterrupt and leaves everything usable.
// State is read and changed with the GIL held; only the hmc calls of Blocking scopes run without.
#pragma once

#include <hmc/hmc.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "buffers.h"

namespace hmcpy {

// Whether the interpreter is being finalized (its name moved in Python 3.13).
inline bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

struct Peer;

// The context (hmc.Context).
struct Core {
  Core(int progress_thread, const std::optional<std::string>& listen_host, uint16_t listen_port);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // The handle, or a failure naming `call` once the context was closed.
  hmc_context_t handle(const char* call) const;
  // Destroys the context once no Blocking scope runs on it; idempotent. Refused while a buffer
  // of its memory is exported (the destruction frees every allocation).
  void close();
  void check_no_exports(const char* call) const;

  hmc_context_t ctx = nullptr;
  bool closed = false;
  int default_timeout_ms = 30000;  // HMC_TIMEOUT_MS, what a timeout of -1 means
  // Blocking scopes running now; close() waits for them to end.
  std::mutex mutex;
  std::condition_variable idle;
  int blocking = 0;
  int exported = 0;  // buffer views and DLPack tensors of its Memory objects alive now
  // The Peers connected or accepted, to name the sender of a notification.
  std::unordered_map<hmc_peer_t, std::weak_ptr<Peer>> peers;
};

// Releases the GIL around blocking hmc calls on one context, which stays alive until it ends.
class Blocking {
 public:
  Blocking(Core& core, const char* call);
  ~Blocking();
  Blocking(const Blocking&) = delete;
  Blocking& operator=(const Blocking&) = delete;

 private:
  Core& core_;
  std::optional<pybind11::gil_scoped_release> released_;
};

// Called at interpreter exit (atexit, hmc/__init__.py): threads that end a Blocking scope from
// then on wait for the process to end rather than take the GIL (which would abort them).
void at_exit();

// Refuses a timeout below -1, as the C API does, before anything is posted or waited.
void check_timeout(int timeout_ms, const char* call);

// Calls op(slice_ms) in slices of at most kSliceMs until it returns something else than
// HMC_ERR_TIMEOUT or HMC_IN_PROGRESS, or timeout_ms (-1: the context's default) has passed
// (HMC_ERR_TIMEOUT). Pending signals are handled between slices: a handler that raises (Ctrl-C's
// KeyboardInterrupt) ends the wait with that exception.
constexpr int kSliceMs = 50;
template <typename Op>
hmc_status_t wait_sliced(Core& core, int timeout_ms, const char* call, Op op);

// Memory from hmc_mem_alloc (hmc.Memory).
struct Memory {
  std::shared_ptr<Core> core;
  void* ptr = nullptr;
  size_t size = 0;
  std::string device;
  bool host = false;  // host memory: Python may read and write it (the buffer protocol)
  int pins = 0;       // Pinned objects (requests, regions, copies) using it now
  int exports = 0;    // buffer views and DLPack tensors over it alive now (memory_protocols.cpp)

  ~Memory();
  void free();
};

// The buffer protocol (host memory) and DLPack's __dlpack__/__dlpack_device__ of hmc.Memory.
// Either export holds the Memory object and counts in `exports`, which free() and the context's
// close() refuse while it is not 0, so no export outlives the allocation.
void bind_memory_protocols(pybind11::class_<Memory, std::shared_ptr<Memory>>& memory);

// A connected peer (hmc.Peer).
struct Peer : std::enable_shared_from_this<Peer> {
  Peer(std::shared_ptr<Core> core, hmc_peer_t h) : core(std::move(core)), h(h) {}
  ~Peer();
  hmc_peer_t handle(const char* call) const;
  void close();

  std::shared_ptr<Core> core;
  hmc_peer_t h;
};

// Local memory registered for peers' put and get (hmc.Region).
struct Region {
  ~Region();
  hmc_region_t handle(const char* call) const;
  void deregister();

  std::shared_ptr<Core> core;
  hmc_region_t h = nullptr;
  std::unique_ptr<Pinned> memory;
};

// A peer's region, imported from its descriptor (hmc.RemoteRegion).
struct RemoteRegion {
  ~RemoteRegion();
  hmc_remote_t handle(const char* call) const;
  void release();

  std::shared_ptr<Peer> peer;
  hmc_remote_t h = nullptr;
  uint64_t size = 0;
};

// A non-blocking operation in flight (hmc.Request).
struct Request {
  Request(std::shared_ptr<Core> core, std::shared_ptr<Peer> peer, hmc_request_t h,
          std::unique_ptr<Pinned> buffer, pybind11::object keep, const char* call);
  ~Request();

  size_t wait(int timeout_ms);
  std::optional<size_t> test();
  bool cancel();
  bool done() const { return ended; }

  std::shared_ptr<Core> core;
  std::shared_ptr<Peer> peer;
  hmc_request_t h;
  std::unique_ptr<Pinned> buffer;
  pybind11::object keep;  // what else must outlive the operation (the TransferList posted)
  const char* call;       // the call that posted it, for messages
  bool busy = false;      // a thread is waiting on it
  // Once ended: the outcome, kept so that wait() and test() can be called again.
  bool ended = false;
  hmc_status_t status = HMC_SUCCESS;
  std::string message;
  size_t bytes = 0;

 private:
  // Records the final status st (its message read from hmc_last_error) and drops what the
  // request held; throws the failure when st is one.
  size_t finish(hmc_status_t st, size_t moved, const char* op);
  size_t end_with_context();
  size_t end(hmc_status_t st, size_t moved, std::string message);
  size_t outcome() const;
};

// Ranges between a Region and a RemoteRegion, posted as one request (hmc.TransferList).
struct TransferList {
  ~TransferList();
  hmc_xfer_list_t handle(const char* call) const;
  void release();

  std::shared_ptr<Core> core;
  std::shared_ptr<Peer> peer;
  hmc_xfer_list_t h = nullptr;
  pybind11::object region, remote;  // the Python objects, kept alive as long as the list
  hmc_xfer_op_t op = HMC_XFER_READ;
  size_t count = 0;
  uint64_t total = 0;
};

// Descriptors of a transfer list from a list of (local_offset, remote_offset, size) triples or
// an array of shape (N, 3) of 64-bit integers.
std::vector<hmc_xfer_desc_t> parse_descriptors(pybind11::handle descs);
hmc_xfer_op_t parse_op(pybind11::handle op);
// hmc.Communicator and its collectives (comm.cpp).
void bind_comm(pybind11::module_& m);
// _route_logging, behind hmc.route_logging_to_python (log_forward.cpp).
void bind_log_forwarding(pybind11::module_& m);

std::shared_ptr<TransferList> prepare_list(pybind11::object region, pybind11::object remote,
                                           pybind11::handle op, pybind11::handle descs);

// ---------------------------------------------------------------------------------------------

template <typename Op>
hmc_status_t wait_sliced(Core& core, int timeout_ms, const char* call, Op op) {
  using clock = std::chrono::steady_clock;
  const int total = timeout_ms < 0 ? core.default_timeout_ms : timeout_ms;
  const auto deadline = clock::now() + std::chrono::milliseconds(total);
  for (;;) {
    long long left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left < 0) left = 0;
    const int slice = static_cast<int>(left < kSliceMs ? left : kSliceMs);
    hmc_status_t st;
    {
      Blocking b(core, call);
      st = op(slice);
    }
    if (st != HMC_ERR_TIMEOUT && st != HMC_IN_PROGRESS) return st;
    if (left <= slice) return HMC_ERR_TIMEOUT;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
}

}  // namespace hmcpy

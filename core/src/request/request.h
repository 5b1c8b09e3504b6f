// A non-blocking operation handed to the application as hmc_request_t.
//
// Requests live in one process-wide table of reusable slots (RequestTable): posting and
// completing an operation costs no allocation and no global lock on a lookup, which matters at
// sub-microsecond latencies. The application's handle names a slot and its generation, so a
// handle kept after its request ended (or a foreign pointer) is answered with
// HMC_ERR_INVALID_HANDLE rather than reaching a reused request.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hmc/hmc.h"
#include "hmc/plugin/net.h"

namespace hmc {

class Context;
class FramedTransfer;
struct Peer;

// Coll: a collective (coll/executor.h), with no peer of its own; it ends when its executor says.
enum class Op { Send, Recv, Put, Get, Coll };
const char* op_name(Op op);

// Laid out for the path of every message: what posting, testing and ending a request read sits
// in its first cache line, and slots start on a line of their own (after a system call, each
// further line the path touches is a cache miss).
struct alignas(64) Request {
  // Owned by RequestTable.
  std::atomic<uint64_t> state{0};  // generation << 1 | live
  uint32_t index = 0;

  Op op = Op::Send;
  std::atomic<bool> done{false};  // written last, with release order
  // Ended through the control plane, not by a transfer of its own (target-side staging): a
  // wait on it services the control plane on every turn. Set before the request is handed out.
  bool control_driven = false;
  bool notify = false;
  bool landed = false;   // a notifying put whose data is in place, waiting to notify in order
  bool carried = false;  // a notifying put whose notification the net plugin carries
  hmc_status_t status = HMC_IN_PROGRESS;
  hmc_net_request_t* net = nullptr;  // guarded by peer->net->mutex(); nullptr once ended
  // Not owned: a context keeps each of its peers, open or closed, until it is destroyed, and
  // releases its requests before it lets them go (Context::~Context). A shared_ptr would cost two
  // atomic operations per message (docs/performance.md, "History").
  Peer* peer = nullptr;
  size_t bytes = 0;
  size_t size = 0;

  uint64_t tag = 0;
  hmc_net_mr_t* temp_mr = nullptr;  // a registration made for this request only
  // A transfer in pieces (framed/framed_transfer.h); nullptr for single plugin operations.
  std::unique_ptr<FramedTransfer> framed;
  Context* owner = nullptr;  // owned by RequestTable
  uint64_t notify_value = 0;
  std::string notify_bytes;  // what the notification carries with the value (hmc_put_notify)
  std::atomic<uint32_t> next_free{0};  // free list: index + 1 of the next free slot, 0 = end
  std::string error;                   // message for hmc_last_error when status is an error
};

// The table of request slots. Slots come in segments that are allocated on demand and never
// freed, so a lookup never touches freed memory; a lookup takes no lock.
class RequestTable {
 public:
  // A fresh request owned by ctx. Throws std::bad_alloc when the table is full.
  static Request* acquire(Context* ctx);
  // The same, with what every transfer sets.
  static Request* acquire(Context* ctx, Op op, Peer* peer, size_t size, uint64_t tag = 0,
                          bool notify = false, uint64_t notify_value = 0,
                          std::string_view notify_bytes = {});
  // Ends the request's life: its handle goes stale, its slot is reused later.
  static void release(Request* req);
  // Releases every live request of ctx (at context destruction).
  static void release_all(Context* ctx);
  // The live request a handle names, or nullptr for NULL, stale or foreign handles.
  static Request* lookup(hmc_request_t handle);
  static hmc_request_t handle(const Request* req);
};

}  // namespace hmc

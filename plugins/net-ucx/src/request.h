// One non-blocking operation (hmc_net_request_t), and the pool that recycles them.
//
// Ownership: a request belongs to its endpoint from post until test reports it done (then it
// returns to the pool). UCX holds a pointer to it (user_data of its callbacks) while any UCX
// operation of it is outstanding (`outstanding` > 0). A request abandoned before that (close_ep,
// finalize, or tested as done while UCX still holds it after its endpoint failed) becomes an
// orphan: the last UCX callback returns it to the pool, and nothing else touches it.
#pragma once

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "hmc/plugin/common.h"

namespace hmc::ucx {

class Context;
class Endpoint;

enum class ReqKind : uint8_t {
  kSend,
  kRecv,
  kPut,
  kGet,
  kControl  // connection setup/teardown messages; never handed to the core
};

struct Request {
  Context* ctx = nullptr;
  Endpoint* ep = nullptr;   // non-null while linked in the endpoint's pending list
  Request* prev = nullptr;  // the endpoint's pending list
  Request* next = nullptr;
  void* ucx = nullptr;  // outstanding UCX receive (for ucp_request_cancel), else null
  // Called (if set) when the request ends; used by control requests.
  void (*on_done)(Request*) = nullptr;
  void* owner = nullptr;  // what on_done acts on
  size_t len = 0;
  size_t bytes = 0;                  // reported by test
  ucs_status_t ucx_status = UCS_OK;  // first error UCX reported
  hmc_plugin_status_t result = HMC_PLUGIN_SUCCESS;
  ReqKind kind = ReqKind::kSend;
  uint8_t outstanding = 0;  // UCX callbacks still to come
  bool done = false;
  bool orphan = false;
  bool user_cancel = false;      // the core asked to cancel it
  bool counted = false;          // in Context::unreported_ (done, not yet tested)
  std::vector<uint8_t> payload;  // control messages: the bytes sent or the receive buffer
  Request* free_next = nullptr;
};

// Recycles requests so the fast path does not allocate. Requests live until the pool dies.
class RequestPool {
 public:
  Request* get(Context* ctx, Endpoint* ep, ReqKind kind);
  void put(Request* r);

 private:
  std::vector<std::unique_ptr<Request[]>> chunks_;
  Request* free_ = nullptr;
};

}  // namespace hmc::ucx

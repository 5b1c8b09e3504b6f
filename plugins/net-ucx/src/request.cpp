#include "request.h"

namespace hmc::ucx {

namespace {
constexpr size_t kChunk = 256;
}

Request* RequestPool::get(Context* ctx, Endpoint* ep, ReqKind kind) {
  if (free_ == nullptr) {
    chunks_.emplace_back(new Request[kChunk]);
    Request* c = chunks_.back().get();
    for (size_t i = 0; i < kChunk; ++i) {
      c[i].free_next = free_;
      free_ = &c[i];
    }
  }
  Request* r = free_;
  free_ = r->free_next;
  r->ctx = ctx;
  r->ep = ep;
  r->prev = r->next = nullptr;
  r->ucx = nullptr;
  r->on_done = nullptr;
  r->owner = nullptr;
  r->len = r->bytes = 0;
  r->ucx_status = UCS_OK;
  r->result = HMC_PLUGIN_SUCCESS;
  r->kind = kind;
  r->outstanding = 0;
  r->done = r->orphan = r->user_cancel = r->counted = false;
  r->payload.clear();
  r->free_next = nullptr;
  return r;
}

void RequestPool::put(Request* r) {
  r->ctx = nullptr;
  r->ep = nullptr;
  if (r->payload.capacity() > 16384) std::vector<uint8_t>().swap(r->payload);
  r->free_next = free_;
  free_ = r;
}

}  // namespace hmc::ucx

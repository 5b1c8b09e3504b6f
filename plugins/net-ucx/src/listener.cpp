#include "listener.h"

#include <memory>

#include "context.h"
#include "endpoint.h"
#include "status.h"
#include "tags.h"
#include "wire.h"

namespace hmc::ucx {

namespace {
// Room for a hello with a large worker address (many RDMA devices make it a few KiB).
constexpr size_t kHelloCap = wire::kHelloHeader + 16384;
}  // namespace

hmc_plugin_status_t Listener::create(Context& ctx, void* handle, size_t* handle_len,
                                     Listener** out) {
  bool net_only = false;
  const std::vector<uint8_t>& addr = ctx.handle_address(&net_only);
  if (addr.empty()) {
    ctx.log().write(HMC_LOG_ERROR,
                    "listen: the UCX worker address (%zu bytes) does not fit in "
                    "a %u-byte connection handle; restrict HMC_UCX_TLS or HMC_UCX_NET_DEVICES",
                    ctx.full_address().size(), HMC_NET_HANDLE_MAX);
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  std::unique_ptr<Listener> l(new Listener(ctx));
  l->id_ = ctx.alloc_id();
  if (l->id_ == 0) {
    ctx.log().write(HMC_LOG_ERROR, "listen: all %u endpoint ids are in use", tags::kMaxId);
    l->handed_out_ = true;  // nothing to return
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  l->nonce_ = ctx.random64();
  wire::Handle h;
  h.flags = net_only ? wire::kHandleNetOnly : 0;
  h.listener_id = l->id_;
  h.nonce = l->nonce_;
  h.address = addr.data();
  h.address_len = addr.size();
  size_t n = wire::encode_handle(h, static_cast<uint8_t*>(handle), HMC_NET_HANDLE_MAX);
  if (n == 0) return HMC_PLUGIN_ERR_INTERNAL;  // handle_address() guarantees it fits
  l->post_hello();
  ctx.add_listener(l.get());
  *handle_len = n;
  *out = l.release();
  return HMC_PLUGIN_SUCCESS;
}

Listener::~Listener() {
  if (welcome_ != nullptr) ctx_.abandon(welcome_);
  delete pending_;  // never handed out: closed like any endpoint
  drop_hello_recv();
  if (!handed_out_) ctx_.free_id(id_);
  ctx_.remove_listener(this);
}

void Listener::drop_hello_recv() {
  if (hello_ == nullptr) return;
  void* u = hello_->ucx;
  ctx_.abandon(hello_);
  if (u != nullptr) ucp_request_cancel(ctx_.worker(), u);
  hello_ = nullptr;
}

bool Listener::post_hello() {
  hello_ = ctx_.post_control_recv(tags::control(tags::Ctrl::kHello, id_), kHelloCap, this, nullptr);
  return hello_ != nullptr;
}

hmc_plugin_status_t Listener::accept(Endpoint** out) {
  if (handed_out_ && pending_ == nullptr) {
    ctx_.log().write(HMC_LOG_ERROR,
                     "accept: this listener already handed out its endpoint "
                     "(one connection per listener)");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  ctx_.progress();
  if (pending_ != nullptr) return finish_accept(out);
  if (hello_ == nullptr || !hello_->done) return HMC_PLUGIN_IN_PROGRESS;
  Request* h = hello_;
  hello_ = nullptr;
  wire::Hello hello;
  std::string why;
  if (h->result == HMC_PLUGIN_ERR_TRUNCATED)
    why = "its hello is larger than " + std::to_string(kHelloCap) + " bytes";
  else if (h->result != HMC_PLUGIN_SUCCESS)
    why = std::string("its hello could not be received (") + status_name(h->result) + ")";
  else
    why = check_hello(h->payload.data(), h->bytes, &hello);
  if (!why.empty()) {
    UX_WARN(ctx_.log(), "listener %u ignored a connection attempt: %s", id_, why.c_str());
    ctx_.abandon(h);
    post_hello();
    return HMC_PLUGIN_IN_PROGRESS;
  }
  hmc_plugin_status_t st = answer(hello);
  ctx_.abandon(h);  // hello's address pointed into h
  if (st != HMC_PLUGIN_SUCCESS) return st;
  return finish_accept(out);
}

hmc_plugin_status_t Listener::take_hello(const uint8_t* bytes, size_t len) {
  if (handed_out_) {
    ctx_.log().write(HMC_LOG_ERROR, "accept_hello: listener %u already made its endpoint", id_);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  wire::Hello hello;
  std::string why = check_hello(bytes, len, &hello);
  if (!why.empty()) {
    ctx_.log().write(HMC_LOG_ERROR, "accept_hello: listener %u: %s", id_, why.c_str());
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  drop_hello_recv();  // no hello will come over UCX
  return answer(hello);
}

std::string Listener::check_hello(const uint8_t* bytes, size_t len, wire::Hello* hello) const {
  std::string why;
  if (!wire::decode_hello(bytes, len, hello, &why)) return "invalid hello: " + why;
  if (hello->nonce != nonce_) return "wrong connection nonce (the handle is not this listener's)";
  return "";
}

hmc_plugin_status_t Listener::answer(const wire::Hello& hello) {
  // The endpoint takes the id over, even when it cannot be made (then it returns the id).
  handed_out_ = true;
  hmc_plugin_status_t st = Endpoint::accept(ctx_, id_, hello, &pending_, &welcome_);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  deadline_ns_ = ctx_.now_ns() + ctx_.timeout_ns();
  return HMC_PLUGIN_SUCCESS;
}

// Hands the endpoint out once its welcome left: over tcp that needs this side's progress (the
// connection back to the connector is set up on demand), which the caller of accept provides.
hmc_plugin_status_t Listener::finish_accept(Endpoint** out) {
  std::string why;
  if (welcome_->done && welcome_->result != HMC_PLUGIN_SUCCESS)
    why = std::string("the answer to the connector could not be sent (") +
          status_name(welcome_->result) + ")";
  else if (!welcome_->done && ctx_.now_ns() > deadline_ns_)
    why = "the answer to the connector could not be sent within " +
          std::to_string(ctx_.timeout_ms()) + " ms (HMC_TIMEOUT_MS)";
  if (!why.empty()) {
    ctx_.log().write(HMC_LOG_ERROR, "listener %u: %s", id_, why.c_str());
    ctx_.abandon(welcome_);
    welcome_ = nullptr;
    delete pending_;
    pending_ = nullptr;
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (!welcome_->done) return HMC_PLUGIN_IN_PROGRESS;
  ctx_.abandon(welcome_);
  welcome_ = nullptr;
  *out = pending_;
  pending_ = nullptr;
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ucx

#include "endpoint.h"

#include <algorithm>
#include <cinttypes>
#include <memory>

#include "context.h"
#include "status.h"

namespace hmc::ucx {

namespace {
constexpr size_t kByeCap = 64;
constexpr size_t kWelcomeCap = wire::kWelcomeSize + 64;
}  // namespace

hmc_plugin_status_t Endpoint::create_uep(const uint8_t* address) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.address = reinterpret_cast<const ucp_address_t*>(address);
  if (ctx_.peer_errors()) {
    // PEER: a broken connection fails this endpoint's operations and UCX calls ep_error_cb.
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &Context::ep_error_cb;
    p.err_handler.arg = &ctx_;
  } else {
    // NONE (HMC_UCX_ERROR_MODE=none): UCX may use every lane (cma, several tcp devices) but
    // says nothing about a broken connection; the process watch, the peer's bye and the core's
    // control plane remain.
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  }
  ucs_status_t us = ucp_ep_create(ctx_.worker(), &p, &uep_);
  if (us != UCS_OK) {
    uep_ = nullptr;
    ctx_.log().write(HMC_LOG_ERROR,
                     "cannot reach %s: ucp_ep_create failed (%s); do both sides "
                     "share a transport (HMC_UCX_TLS)?",
                     peer_name_.c_str(), ucs_status_string(us));
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::connect(Context& ctx, const wire::Handle& h, Endpoint** out) {
  std::unique_ptr<Endpoint> e(new Endpoint(ctx));
  e->peer_id_ = h.listener_id;
  e->nonce_ = h.nonce;
  e->peer_name_ = "listener " + std::to_string(h.listener_id);
  e->rx_id_ = ctx.alloc_id();
  if (e->rx_id_ == 0) {
    ctx.log().write(HMC_LOG_ERROR, "connect: all %u endpoint ids are in use", tags::kMaxId);
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  hmc_plugin_status_t st = e->create_uep(h.address);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  ctx.add_endpoint(e.get(), e->uep_);
  e->post_welcome_recv();
  wire::Hello hello;
  hello.rx_id = e->rx_id_;
  hello.nonce = h.nonce;
  hello.who = ctx.self();
  hello.address = ctx.full_address().data();
  hello.address_len = ctx.full_address().size();
  // Sent over UCX by this context's next progress pass (service()), unless the core takes it
  // first to carry it over its control plane (take_hello).
  wire::encode_hello(hello, &e->unsent_hello_);
  ctx.attend(e.get());
  e->deadline_ns_ = ctx.now_ns() + ctx.timeout_ns();
  *out = e.release();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::accept(Context& ctx, uint16_t rx_id, const wire::Hello& h,
                                     Endpoint** out, Request** welcome) {
  std::unique_ptr<Endpoint> e(new Endpoint(ctx));
  e->rx_id_ = rx_id;
  e->peer_id_ = h.rx_id;
  e->nonce_ = h.nonce;
  e->peer_name_ = "pid " + std::to_string(h.who.pid);
  hmc_plugin_status_t st = e->create_uep(h.address);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  ctx.add_endpoint(e.get(), e->uep_);
  // Watch the connector before answering: once answered, it may send, exit, and leave only
  // its messages behind (which must stay receivable).
  e->established(h.who);
  wire::Welcome w;
  w.listener_id = rx_id;
  w.nonce = h.nonce;
  w.who = ctx.self();
  std::vector<uint8_t> bytes;
  wire::encode_welcome(w, &bytes);
  if (e->uep_ != nullptr) {
    *welcome = ctx.post_control_send(e->uep_, tags::control(tags::Ctrl::kWelcome, e->peer_id_),
                                     std::move(bytes));
  } else {  // the connector is already gone: nothing to answer
    *welcome = ctx.new_request(ReqKind::kControl);
    ctx.finish(*welcome, HMC_PLUGIN_ERR_PEER_LOST);
  }
  *out = e.release();
  return HMC_PLUGIN_SUCCESS;
}

Endpoint::~Endpoint() {
  Request* bye = nullptr;
  if (state_ == State::kReady && uep_ != nullptr) {
    // Tells the peer at once (its pending requests end with PEER_LOST), whatever the transport.
    std::vector<uint8_t> bytes;
    wire::encode_bye(nonce_, &bytes);
    bye = ctx_.post_control_send(uep_, tags::control(tags::Ctrl::kBye, peer_id_), std::move(bytes));
  }
  ctx_.remove_endpoint(this, uep_);
  drop_control(&hello_);
  drop_control(&welcome_);
  drop_control(&bye_);
  // Pending requests become orphans; UCX's cancellations (below, and the forced close) free them.
  // Until it has, UCX may still move bytes of theirs (a get's reply already on the wire): with
  // any pending, the endpoint closes at once, without lingering for the bye, and we wait for
  // UCX to let go of their buffers, which the core hands back to the application.
  const bool busy = pending_ != nullptr;
  std::vector<void*> recvs;
  for (Request* r = pending_; r != nullptr; r = r->next)
    if (r->kind == ReqKind::kRecv && r->ucx != nullptr) recvs.push_back(r->ucx);
  while (pending_ != nullptr) ctx_.abandon(pending_);
  for (void* u : recvs) ucp_request_cancel(ctx_.worker(), u);
  release_ucx_rkeys();
  if (uep_ != nullptr) {
    if (bye != nullptr && !bye->done && !busy) {
      ctx_.linger(uep_, bye);  // closed once the bye is out, or after a short while
    } else {
      if (bye != nullptr) ctx_.abandon(bye);
      ctx_.close_ucp_ep(uep_);
    }
    uep_ = nullptr;
  } else if (bye != nullptr) {
    ctx_.abandon(bye);
  }
  if (busy) ctx_.settle([this] { return ctx_.data_orphans() > 0; });
  ctx_.free_id(rx_id_);
}

void Endpoint::post_welcome_recv() {
  welcome_ = ctx_.post_control_recv(tags::control(tags::Ctrl::kWelcome, rx_id_), kWelcomeCap, this,
                                    nullptr);
}

void Endpoint::post_bye_recv() {
  bye_ = ctx_.post_control_recv(tags::control(tags::Ctrl::kBye, rx_id_), kByeCap, this,
                                &Endpoint::on_bye);
}

void Endpoint::on_bye(Request* r) {
  // Runs inside a UCX callback: act on it after the progress call (Context::service).
  auto* e = static_cast<Endpoint*>(r->owner);
  e->bye_arrived_ = true;
  e->ctx_.attend(e);
}

void Endpoint::drop_control(Request** rp) {
  Request* r = *rp;
  if (r == nullptr) return;
  *rp = nullptr;
  void* u = r->ucx;
  ctx_.abandon(r);
  if (u != nullptr) ucp_request_cancel(ctx_.worker(), u);
}

hmc_plugin_status_t Endpoint::take_hello(uint8_t* out, size_t* len) {
  if (unsent_hello_.empty()) {
    *len = 0;
    return HMC_PLUGIN_SUCCESS;
  }
  if (unsent_hello_.size() > *len) {
    ctx_.log().write(HMC_LOG_ERROR, "connect_hello: the hello (%zu bytes) does not fit in %zu",
                     unsent_hello_.size(), *len);
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  std::copy(unsent_hello_.begin(), unsent_hello_.end(), out);
  *len = unsent_hello_.size();
  unsent_hello_.clear();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::ready_status() {
  if (state_ == State::kReady) return HMC_PLUGIN_SUCCESS;
  if (state_ == State::kFailed) return HMC_PLUGIN_ERR_PEER_LOST;
  ctx_.progress();
  if (state_ == State::kFailed) return HMC_PLUGIN_ERR_PEER_LOST;
  if (welcome_ != nullptr && welcome_->done) {
    wire::Welcome w;
    std::string why;
    if (welcome_->result != HMC_PLUGIN_SUCCESS)
      why = std::string("the listener's answer could not be received (") +
            status_name(welcome_->result) + ")";
    else if (!wire::decode_welcome(welcome_->payload.data(), welcome_->bytes, &w, &why))
      why = "the listener's answer is invalid: " + why;
    if (!why.empty()) {
      fail(why);
      return HMC_PLUGIN_ERR_PEER_LOST;
    }
    if (w.nonce != nonce_ || w.listener_id != peer_id_) {
      // Left over from an earlier connection that had our rx id: wait for ours.
      UX_DEBUG(ctx_.log(), "dropped a welcome meant for another connection");
      drop_control(&welcome_);
      post_welcome_recv();
      return HMC_PLUGIN_IN_PROGRESS;
    }
    established(w.who);
    return state_ == State::kReady ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (hello_ != nullptr && hello_->done && hello_->result != HMC_PLUGIN_SUCCESS) {
    fail(std::string("the hello to the listener could not be sent (") +
         status_name(hello_->result) + ")");
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (ctx_.now_ns() > deadline_ns_) {
    fail("no answer from the listener within " + std::to_string(ctx_.timeout_ms()) +
         " ms (HMC_TIMEOUT_MS)");
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  return HMC_PLUGIN_IN_PROGRESS;
}

void Endpoint::established(const ProcessIdentity& peer) {
  state_ = State::kReady;
  peer_ = peer;
  peer_name_ = "pid " + std::to_string(peer.pid);
  drop_control(&hello_);
  drop_control(&welcome_);
  post_bye_recv();
  if (ctx_.self().same_pid_space(peer) && !watch_.start(peer)) {
    fail("the peer process (pid " + std::to_string(peer.pid) + ") has already exited");
    return;
  }
  UX_DEBUG(ctx_.log(), "endpoint %u <-> %u to %s established%s", rx_id_, peer_id_,
           peer_name_.c_str(), watch_.active() ? " (peer process watched)" : "");
}

void Endpoint::schedule_failure(const std::string& reason) {
  if (state_ == State::kFailed) return;
  if (failure_.empty()) failure_ = reason;
  ctx_.attend(this);
}

void Endpoint::service() {
  if (!unsent_hello_.empty() && state_ == State::kConnecting) {
    hello_ = ctx_.post_control_send(uep_, tags::control(tags::Ctrl::kHello, peer_id_),
                                    std::move(unsent_hello_));
    unsent_hello_.clear();
  }
  if (!failure_.empty()) {
    std::string why;
    why.swap(failure_);
    fail(why);
  }
  if (!bye_arrived_) return;
  bye_arrived_ = false;
  if (state_ == State::kFailed || bye_ == nullptr || !bye_->done) return;
  uint64_t nonce = 0;
  if (bye_->result == HMC_PLUGIN_SUCCESS &&
      wire::decode_bye(bye_->payload.data(), bye_->bytes, &nonce) && nonce == nonce_) {
    fail("the peer closed the endpoint");
    return;
  }
  // Not ours (left over from an earlier connection with our id): keep listening.
  drop_control(&bye_);
  post_bye_recv();
}

void Endpoint::fail(const std::string& reason) {
  if (state_ == State::kFailed) return;
  state_ = State::kFailed;
  failure_.clear();
  int level = reason == "the peer closed the endpoint" ? HMC_LOG_INFO : HMC_LOG_WARN;
  HMC_PLUGIN_LOG(ctx_.log(), level, "endpoint to %s lost: %s", peer_name_.c_str(), reason.c_str());
  // Whatever already arrived gets matched first: a pending receive it satisfies ends normally.
  ctx_.drain_events();
  drop_control(&hello_);
  drop_control(&welcome_);
  drop_control(&bye_);
  // Receives belong to the worker, not to the UCP endpoint: cancel them (they end PEER_LOST).
  std::vector<void*> recvs;
  for (Request* r = pending_; r != nullptr; r = r->next)
    if (r->kind == ReqKind::kRecv && r->ucx != nullptr) recvs.push_back(r->ucx);
  for (void* u : recvs) ucp_request_cancel(ctx_.worker(), u);
  release_ucx_rkeys();
  if (uep_ != nullptr) {
    ctx_.close_ucp_ep(uep_);  // UCX cancels the sends and one-sided operations still queued
    uep_ = nullptr;
  }
  // A request must not end while UCX may still move its bytes (the core would hand its buffer
  // back): UCX calls back each one it cancels. What it never calls back ends now; the late
  // callback, if any, finds it ended (or orphaned) and only recycles it.
  ctx_.settle([this] { return pending_ != nullptr; });
  while (pending_ != nullptr) ctx_.finish(pending_, HMC_PLUGIN_ERR_PEER_LOST);
}

void Endpoint::release_ucx_rkeys() {
  for (RemoteKey* k : rkeys_) {
    if (k->rkey != nullptr) ucp_rkey_destroy(k->rkey);
    k->rkey = nullptr;
    k->ep = nullptr;
  }
  rkeys_.clear();
}

void Endpoint::link(Request* r) {
  r->ep = this;
  r->prev = nullptr;
  r->next = pending_;
  if (pending_ != nullptr) pending_->prev = r;
  pending_ = r;
}

void Endpoint::unlink(Request* r) {
  if (r->prev != nullptr)
    r->prev->next = r->next;
  else
    pending_ = r->next;
  if (r->next != nullptr) r->next->prev = r->prev;
  r->prev = r->next = nullptr;
  r->ep = nullptr;
}

// --- operations --------------------------------------------------------------------------

hmc_plugin_status_t Endpoint::usable(const char* what) const {
  if (state_ == State::kReady) return HMC_PLUGIN_SUCCESS;
  if (state_ == State::kFailed) return HMC_PLUGIN_ERR_PEER_LOST;
  ctx_.log().write(HMC_LOG_ERROR,
                   "%s on an endpoint that is not established yet (ep_ready "
                   "has not returned SUCCESS)",
                   what);
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

hmc_plugin_status_t Endpoint::post_error(Request* r, ucs_status_t us, const char* what) {
  // Nothing of r is outstanding in UCX: it goes straight back.
  unlink(r);
  ctx_.release(r);
  hmc_plugin_status_t st = from_ucs(us);
  if (st == HMC_PLUGIN_ERR_PEER_LOST) {
    schedule_failure(std::string("UCX reports the connection broken (") + ucs_status_string(us) +
                     ")");
  } else {
    ctx_.log().write(HMC_LOG_ERROR, "%s to %s failed: %s", what, peer_name_.c_str(),
                     ucs_status_string(us));
  }
  return st;
}

UX_HOT hmc_plugin_status_t Endpoint::post_send(const void* buf, size_t len, uint64_t tag,
                                               Request** out) {
  hmc_plugin_status_t st = usable("isend");
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Request* r = ctx_.new_request(ReqKind::kSend);
  r->len = len;
  link(r);
  ucp_request_param_t p;
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &Context::send_cb;
  p.user_data = r;
  ++r->outstanding;
  void* s = ucp_tag_send_nbx(uep_, buf, len, tags::data(peer_id_, tag), &p);
  ucs_status_t us = ctx_.absorb(r, s);
  if (us != UCS_OK) return post_error(r, us, "isend");
  if (r->outstanding == 0) ctx_.complete(r);
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

UX_HOT hmc_plugin_status_t Endpoint::post_recv(void* buf, size_t len, uint64_t tag, Request** out) {
  const uint64_t utag = tags::data(rx_id_, tag);
  const bool after_break = state_ == State::kFailed;
  if (after_break) {
    // What the peer sent before the break stays receivable (its messages wait in the worker's
    // unexpected queue under our rx id, which stays reserved until close_ep); a receive that
    // matches nothing fails.
    ctx_.drain_events();
    ucp_tag_recv_info_t info;
    if (ucp_tag_probe_nb(ctx_.worker(), utag, tags::kFullMask, 0, &info) == nullptr)
      return HMC_PLUGIN_ERR_PEER_LOST;
  } else {
    hmc_plugin_status_t st = usable("irecv");
    if (st != HMC_PLUGIN_SUCCESS) return st;
  }
  Request* r = ctx_.new_request(ReqKind::kRecv);
  r->len = len;
  link(r);
  ucp_request_param_t p;
  // No immediate completion: UCX 1.13 does not report the received length (recv_info) when a
  // receive completes inside the call; the callback does (it then runs inside the call).
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = &Context::recv_cb;
  p.user_data = r;
  ++r->outstanding;
  void* s = ucp_tag_recv_nbx(ctx_.worker(), buf, len, utag, tags::kFullMask, &p);
  if (s != nullptr && !UCS_PTR_IS_ERR(s) && r->outstanding > 0) r->ucx = s;  // still pending
  ucs_status_t us = ctx_.absorb(r, s);
  if (us != UCS_OK) return post_error(r, us, "irecv");
  if (r->outstanding == 0) ctx_.complete(r);
  // After a break, a message that arrived whole completes inside the call; one whose data stayed
  // with the peer (a rendezvous) cannot complete any more.
  if (after_break && !r->done) ctx_.finish(r, HMC_PLUGIN_ERR_PEER_LOST);
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::cancel(Request* r) {
  if (r->done || r->kind != ReqKind::kRecv || r->ucx == nullptr)
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  r->user_cancel = true;
  ucp_request_cancel(ctx_.worker(), r->ucx);
  // An unmatched receive ends at once (CANCELLED); a matched one (rendezvous in flight) goes on.
  return r->done ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_NOT_SUPPORTED;
}

hmc_plugin_status_t Endpoint::refuse(ReqKind kind, size_t len, uint64_t addr, const RemoteKey& k,
                                     const char* why, Request** out) {
  UX_DEBUG(ctx_.log(),
           "%s of %zu bytes at 0x%" PRIx64 " refused: %s (region 0x%" PRIx64 "+%" PRIu64
           ", access 0x%x)",
           kind == ReqKind::kPut ? "put" : "get", len, addr, why, k.base, k.len, k.access);
  Request* r = ctx_.new_request(kind);
  r->len = len;
  ctx_.finish(r, HMC_PLUGIN_ERR_REMOTE);
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_put(const void* buf, size_t len, uint64_t addr, RemoteKey* k,
                                       Request** out) {
  hmc_plugin_status_t st = usable("iput");
  if (st != HMC_PLUGIN_SUCCESS) return st;
  if (k->ep != this) {
    ctx_.log().write(HMC_LOG_ERROR, "iput: the remote key was unpacked on another endpoint");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (k->corrupt) return refuse(ReqKind::kPut, len, addr, *k, "the key failed its check", out);
  if (!(k->access & HMC_NET_ACCESS_REMOTE_WRITE))
    return refuse(ReqKind::kPut, len, addr, *k, "the region does not allow remote writes", out);
  if (!rkey_allows(*k, addr, len, HMC_NET_ACCESS_REMOTE_WRITE))
    return refuse(ReqKind::kPut, len, addr, *k, "outside the registered region", out);
  Request* r = ctx_.new_request(ReqKind::kPut);
  r->len = len;
  if (len == 0) {
    ctx_.finish(r, HMC_PLUGIN_SUCCESS);
    *out = r;
    return HMC_PLUGIN_SUCCESS;
  }
  link(r);
  ucp_request_param_t p;
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &Context::send_cb;
  p.user_data = r;
  ++r->outstanding;
  void* s = ucp_put_nbx(uep_, buf, len, addr, k->rkey, &p);
  ucs_status_t us = ctx_.absorb(r, s);
  if (us != UCS_OK) return post_error(r, us, "iput");
  // A put completes locally; the flush completes once the data is in place at the target,
  // which is what the ABI's completion of a put means.
  ++r->outstanding;
  ctx_.absorb(r, ucp_ep_flush_nbx(uep_, &p));
  if (r->outstanding == 0) ctx_.complete(r);
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_get(void* buf, size_t len, uint64_t addr, RemoteKey* k,
                                       Request** out) {
  hmc_plugin_status_t st = usable("iget");
  if (st != HMC_PLUGIN_SUCCESS) return st;
  if (k->ep != this) {
    ctx_.log().write(HMC_LOG_ERROR, "iget: the remote key was unpacked on another endpoint");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (k->corrupt) return refuse(ReqKind::kGet, len, addr, *k, "the key failed its check", out);
  if (!(k->access & HMC_NET_ACCESS_REMOTE_READ))
    return refuse(ReqKind::kGet, len, addr, *k, "the region does not allow remote reads", out);
  if (!rkey_allows(*k, addr, len, HMC_NET_ACCESS_REMOTE_READ))
    return refuse(ReqKind::kGet, len, addr, *k, "outside the registered region", out);
  Request* r = ctx_.new_request(ReqKind::kGet);
  r->len = len;
  if (len == 0) {
    ctx_.finish(r, HMC_PLUGIN_SUCCESS);
    *out = r;
    return HMC_PLUGIN_SUCCESS;
  }
  link(r);
  ucp_request_param_t p;
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &Context::send_cb;
  p.user_data = r;
  ++r->outstanding;
  void* s = ucp_get_nbx(uep_, buf, len, addr, k->rkey, &p);
  ucs_status_t us = ctx_.absorb(r, s);
  if (us != UCS_OK) return post_error(r, us, "iget");
  if (r->outstanding == 0) ctx_.complete(r);
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_vec(bool put, const hmc_net_iov_t* iov, size_t count,
                                       RemoteKey* k, Request** out) {
  const char* what = put ? "iput_v" : "iget_v";
  const ReqKind kind = put ? ReqKind::kPut : ReqKind::kGet;
  const uint32_t need = put ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ;
  hmc_plugin_status_t st = usable(what);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  if (k->ep != this) {
    ctx_.log().write(HMC_LOG_ERROR, "%s: the remote key was unpacked on another endpoint", what);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const hmc_net_iov_t& v = iov[i];
    if (!rkey_allows(*k, v.remote_addr, v.len, need))
      return refuse(kind, v.len, v.remote_addr, *k,
                    k->corrupt                ? "the key failed its check"
                    : (k->access & need) == 0 ? "the region does not allow this access"
                                              : "a piece lies outside the registered region",
                    out);
    total += v.len;
  }
  Request* r = ctx_.new_request(kind);
  r->len = total;
  if (total == 0) {
    ctx_.finish(r, HMC_PLUGIN_SUCCESS);
    *out = r;
    return HMC_PLUGIN_SUCCESS;
  }
  link(r);
  // The pieces carry no callback: a request UCX returns for one is let go at once (UCX frees it
  // when it ends), and an error it reports later fails the flush below.
  ucp_request_param_t bare;
  bare.op_attr_mask = 0;
  for (size_t i = 0; i < count; ++i) {
    const hmc_net_iov_t& v = iov[i];
    if (v.len == 0) continue;
    void* s = put ? ucp_put_nbx(uep_, v.buf, v.len, v.remote_addr, k->rkey, &bare)
                  : ucp_get_nbx(uep_, v.buf, v.len, v.remote_addr, k->rkey, &bare);
    if (UCS_PTR_IS_ERR(s)) {
      // The pieces already posted still run: the request ends after the flush, with this error.
      r->ucx_status = UCS_PTR_STATUS(s);
      break;
    }
    if (s != nullptr) ucp_request_free(s);
  }
  // The flush ends once every piece posted before it is in place at the target (put) or here
  // (get): the one completion of the lot.
  ucp_request_param_t p;
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &Context::send_cb;
  p.user_data = r;
  ++r->outstanding;
  ctx_.absorb(r, ucp_ep_flush_nbx(uep_, &p));
  if (r->outstanding == 0) ctx_.complete(r);
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

// --- remote keys -------------------------------------------------------------------------

hmc_plugin_status_t Endpoint::unpack_rkey(const void* blob, size_t len, RemoteKey** out) {
  hmc_plugin_status_t st = usable("rkey_unpack");
  if (st != HMC_PLUGIN_SUCCESS) return st;
  ParsedRkey pr;
  std::string why;
  RkeyParse res = parse_rkey(blob, len, &pr, &why);
  if (res == RkeyParse::kInvalid) {
    ctx_.log().write(HMC_LOG_ERROR, "rkey_unpack: %s", why.c_str());
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  auto k = std::make_unique<RemoteKey>();
  k->ctx = &ctx_;
  k->ep = this;
  k->base = pr.base;
  k->len = pr.len;
  k->access = pr.access;
  k->corrupt = res == RkeyParse::kCorrupt;
  if (k->corrupt) {
    UX_WARN(ctx_.log(),
            "a remote key from %s fails its check (corrupted or forged): every put "
            "and get through it is refused",
            peer_name_.c_str());
  } else if (pr.ucx_len > 0) {
    ucs_status_t us = ucp_ep_rkey_unpack(uep_, pr.ucx, &k->rkey);
    if (us != UCS_OK) {
      ctx_.log().write(HMC_LOG_ERROR, "rkey_unpack: UCX cannot use the remote key from %s (%s)",
                       peer_name_.c_str(), ucs_status_string(us));
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
  }
  rkeys_.push_back(k.get());
  ctx_.rkeys().insert(k.get());
  *out = k.release();
  return HMC_PLUGIN_SUCCESS;
}

void Endpoint::forget_rkey(RemoteKey* k) {
  for (size_t i = 0; i < rkeys_.size(); ++i) {
    if (rkeys_[i] == k) {
      rkeys_[i] = rkeys_.back();
      rkeys_.pop_back();
      return;
    }
  }
}

}  // namespace hmc::ucx

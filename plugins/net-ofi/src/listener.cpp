#include "listener.h"

#include "context.h"
#include "endpoint.h"
#include "util.h"
#include "wire.h"

namespace hmc::ofi {
namespace {
// Malformed hellos (a stray sender guessing ids) are ignored this many times, then the
// listener gives up rather than reposting forever.
constexpr int kMaxBadHellos = 16;
}  // namespace

Listener::~Listener() {
  dev_.ctx().listeners().erase(this);
  dev_.remove_listener(this);
  if (hello_ != nullptr) {
    dev_.cancel_posted(hello_);
    dev_.adopt_orphan(hello_);
    hello_ = nullptr;
  }
  if (ready_ != nullptr) dev_.ctx().destroy_endpoint(ready_, true);
}

hmc_plugin_status_t Listener::start(void* handle, size_t* handle_len) {
  id_ = random_u64() & kCtrlIdMask;
  if (id_ == 0) id_ = 1;
  ConnHandle h;
  h.device = dev_.name();
  h.addr = dev_.address();
  h.listener_id = id_;
  size_t n = encode_handle(h, static_cast<uint8_t*>(handle), HMC_NET_HANDLE_MAX);
  if (n == 0) {
    dev_.log().write(HMC_LOG_ERROR, "listen: the connection handle does not fit in %u bytes",
                     HMC_NET_HANDLE_MAX);
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  Request* r = dev_.new_request(ReqKind::kHelloRecv);
  r->listener = this;
  r->bounce = dev_.bounce_get();
  r->bounce_len = kHelloMax + 8;
  r->addr = FI_ADDR_UNSPEC;  // the connector is not in the address vector yet
  r->tag = ctrl_tag(CtrlType::kHello, id_);
  hmc_plugin_status_t st = dev_.submit(r);
  if (st != HMC_PLUGIN_SUCCESS) {
    dev_.release(r);
    return st;
  }
  hello_ = r;
  dev_.add_listener(this);
  *handle_len = n;
  OFI_DEBUG(dev_.log(), "%s: listening (id %014llx)", dev_.name().c_str(),
            static_cast<unsigned long long>(id_));
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Listener::accept(Endpoint** out) {
  if (handed_out_) {
    dev_.log().write(HMC_LOG_ERROR,
                     "accept: this listener already handed out its endpoint (one "
                     "peer per listener)");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (ready_ == nullptr && failed_ == HMC_PLUGIN_SUCCESS) dev_.progress();
  if (ready_ != nullptr) {
    *out = ready_;
    ready_ = nullptr;
    handed_out_ = true;
    return HMC_PLUGIN_SUCCESS;
  }
  return failed_ != HMC_PLUGIN_SUCCESS ? failed_ : HMC_PLUGIN_IN_PROGRESS;
}

void Listener::repost(Request* r) {
  if (++bad_hellos_ > kMaxBadHellos) {
    dev_.log().write(HMC_LOG_ERROR, "listen: %d malformed hellos; the listener gives up",
                     bad_hellos_ - 1);
    failed_ = HMC_PLUGIN_ERR_PEER_LOST;
    hello_ = nullptr;
    dev_.release(r);
    return;
  }
  r->rx_len = 0;
  if (dev_.submit(r) != HMC_PLUGIN_SUCCESS) {
    failed_ = HMC_PLUGIN_ERR_INTERNAL;
    hello_ = nullptr;
    dev_.release(r);
  }
}

void Listener::on_hello(Request* r, int err) {
  const Log& log = dev_.log();
  if (err == FI_ECANCELED) {
    hello_ = nullptr;
    dev_.release(r);
    return;
  }
  Hello h;
  if (err != 0 || !decode_hello(r->bounce.data, r->rx_len, &h) || h.listener_id != id_) {
    OFI_WARN(log, "listen: ignored a malformed hello (%s)", err != 0 ? fi_err(err) : "bad format");
    repost(r);
    return;
  }
  hello_ = nullptr;
  dev_.release(r);
  std::string why;
  AvEntry* av = dev_.av_acquire(h.addr, &why);
  if (av == nullptr) {
    log.write(HMC_LOG_ERROR, "listen: the connector's address is not usable: %s", why.c_str());
    failed_ = HMC_PLUGIN_ERR_PEER_LOST;
    return;
  }
  Endpoint* ep = dev_.ctx().make_endpoint(dev_);
  const int slot = dev_.slot_acquire(av);
  Ack ack;
  ack.listener_id = id_;
  ack.nonce = h.nonce;
  if (slot < 0) {
    // Tell the connector why, then give the address back.
    ep->adopt(av, -1, h.slot, 0, 0);
    ack.status = AckStatus::kNoSlot;
    ep->send_ctrl(encode_ack(ack), ctrl_tag(CtrlType::kAck, h.nonce));
    dev_.ctx().destroy_endpoint(ep, true);
    log.write(HMC_LOG_ERROR, "listen: all %d receive slots towards the connecting peer are in use",
              kDataSlots);
    failed_ = HMC_PLUGIN_ERR_NO_MEMORY;
    return;
  }
  ep->adopt(av, slot, h.slot, h.probe_addr, h.probe_key);
  ack.slot = static_cast<uint8_t>(slot);
  ack.probe_addr = dev_.probe_addr();
  ack.probe_key = dev_.probe_key();
  ack.status = AckStatus::kOk;
  if (ep->send_ctrl(encode_ack(ack), ctrl_tag(CtrlType::kAck, h.nonce)) != HMC_PLUGIN_SUCCESS) {
    dev_.ctx().destroy_endpoint(ep, false);
    failed_ = HMC_PLUGIN_ERR_PEER_LOST;
    return;
  }
  ready_ = ep;
  OFI_DEBUG(log, "%s: accepted a peer (receive slot %d, peer's slot %d)", dev_.name().c_str(), slot,
            static_cast<int>(h.slot));
}

}  // namespace hmc::ofi

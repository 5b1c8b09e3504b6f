#include "listener.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "context.h"
#include "endpoint.h"

namespace hmc::ibverbs {

Listener::Listener(Device& dev) : dev_(dev) {
  dev_.ctx().listeners().insert(this);
}

Listener::~Listener() {
  Context& c = dev_.ctx();
  for (auto& s : incoming_) c.unwatch(s->fd());
  if (pending_ != nullptr && c.endpoints().count(pending_) != 0) delete pending_;
  if (fd_ >= 0) {
    c.unwatch(fd_);
    ::close(fd_);
  }
  c.listeners().erase(this);
}

hmc_plugin_status_t Listener::start(void* handle, size_t* handle_len) {
  Context& c = dev_.ctx();
  std::string host = c.config().listen_host;
  if (host == "0.0.0.0" || host == "::") {
    // Listen where the peer can reach us: the port's IPv4 RoCE address when it has one.
    const uint8_t* g = dev_.info().gid.raw;
    char buf[INET_ADDRSTRLEN];
    host = gid_is_ipv4_mapped(g) && inet_ntop(AF_INET, g + 12, buf, sizeof buf) != nullptr
               ? buf
               : "127.0.0.1";
  }
  ConnHandle h;
  std::string why;
  fd_ = listen_on(host, &h.addr, &h.addr_len, &why);
  if (fd_ < 0) {
    IB_ERROR(c.log(), "listen on %s: %s", dev_.name().c_str(), why.c_str());
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  c.watch(fd_);
  id_ = c.random64();
  h.listener_id = id_;
  *handle_len = encode_handle(h, static_cast<uint8_t*>(handle));
  return HMC_PLUGIN_SUCCESS;
}

void Listener::on_readable() {
  Context& c = dev_.ctx();
  for (;;) {
    int s = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (s < 0) break;
    tune_socket(s);
    c.watch(s);
    incoming_.push_back(std::make_unique<SideChannel>(s));
  }
}

hmc_plugin_status_t Listener::accept(Endpoint** out) {
  if (handed_out_) {
    IB_ERROR(dev_.ctx().log(), "accept: this listener already handed out its endpoint");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  Context& c = dev_.ctx();
  c.progress();
  for (size_t i = 0; pending_ == nullptr && i < incoming_.size();) {
    std::vector<Frame> frames;
    std::string why;
    SideChannel::Read rd = incoming_[i]->read(&frames, &why);
    QpInfo hello;
    bool drop = rd != SideChannel::Read::kOk;
    if (!frames.empty()) {
      drop = true;
      if (frames.size() != 1 || frames[0].type != SideFrame::kHello)
        why = "expected one HELLO";
      else if (!decode_qp_info(frames[0].payload.data(), frames[0].payload.size(), &hello, &why))
        ;
      else if (hello.listener_id != id_)
        why = "the HELLO is for another listener";
      else
        drop = false;
      if (!drop) {
        std::unique_ptr<SideChannel> side = std::move(incoming_[i]);
        incoming_.erase(incoming_.begin() + static_cast<long>(i));
        c.unwatch(side->fd());
        auto* e = new Endpoint(dev_);
        if (e->answer(std::move(side), hello) != HMC_PLUGIN_SUCCESS) {
          delete e;
          continue;
        }
        pending_ = e;
        break;
      }
      IB_WARN(c.log(), "listener on %s: a connection refused: %s", dev_.name().c_str(),
              why.c_str());
    }
    if (drop) {
      c.unwatch(incoming_[i]->fd());
      incoming_.erase(incoming_.begin() + static_cast<long>(i));
      continue;
    }
    ++i;
  }
  if (pending_ == nullptr) return HMC_PLUGIN_IN_PROGRESS;
  pending_->progress();
  if (pending_->stage() == Endpoint::Stage::kReady) {
    *out = pending_;
    pending_ = nullptr;
    handed_out_ = true;
    return HMC_PLUGIN_SUCCESS;
  }
  if (pending_->stage() == Endpoint::Stage::kLost) {
    delete pending_;  // logged why; wait for another connector
    pending_ = nullptr;
  }
  return HMC_PLUGIN_IN_PROGRESS;
}

}  // namespace hmc::ibverbs

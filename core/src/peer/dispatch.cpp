#include "peer/dispatch.h"

#include <cstdlib>

#include "peer/messages.h"
#include "peer/peer.h"
#include "util/log.h"

namespace hmc {

void ControlDispatch::add(control::MsgType type, Handler handler) {
  const size_t i = static_cast<size_t>(type);
  if (i >= kTypes || handlers_[i]) {
    HMC_LOG_E("control dispatch: type {} registered twice or out of range", i);
    std::abort();  // a wiring bug
  }
  handlers_[i] = std::move(handler);
}

std::string ControlDispatch::dispatch(const std::shared_ptr<Peer>& peer,
                                      const control::Channel::Message& m) const {
  const size_t i = static_cast<size_t>(m.type);
  if (i < kTypes && handlers_[i]) return handlers_[i](peer, m);
  HMC_LOG_W("peer {}: unexpected control message type {} ignored", peer->name,
            static_cast<int>(m.type));
  return "";
}

void add_liveness_handlers(ControlDispatch& d) {
  d.add(
      control::MsgType::Heartbeat,
      [](const std::shared_ptr<Peer>&, const control::Channel::Message&) { return std::string(); });
  d.add(control::MsgType::Bye,
        [](const std::shared_ptr<Peer>& peer, const control::Channel::Message& m) {
          std::string reason;
          if (!msg::decode_bye(m.payload.data(), m.payload.size(), &reason))
            reason = "no reason given";
          // Not lost yet: messages it sent before closing may still be arriving on the data path,
          // and its end of that path breaking is what ends the receives waiting for more.
          if (!peer->remote_closed.exchange(true))
            HMC_LOG_I("peer {}: {} ({})", peer->name, kPeerClosed, reason);
          return std::string();
        });
}

}  // namespace hmc

// Control messages of connected peers, dispatched by type: the module that owns a protocol
// registers the handlers of its message types while the context is wired, and the table is
// read-only from then on (lock-free dispatch). Heartbeat and Bye belong to the peer layer.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "control/channel.h"

namespace hmc {

struct Peer;

// How a Bye reads in a lost peer's reason: an orderly close, logged as information.
constexpr const char* kPeerClosed = "the peer closed the connection";

class ControlDispatch {
 public:
  // Handles one message of a registered peer (its ctrl_mutex held, maybe its net mutex); returns
  // why the peer is gone, or "".
  using Handler =
      std::function<std::string(const std::shared_ptr<Peer>&, const control::Channel::Message&)>;
  // Registers the handler of `type`; a type has one handler.
  void add(control::MsgType type, Handler handler);
  // Calls the handler of m's type; a type nobody registered is logged and ignored.
  std::string dispatch(const std::shared_ptr<Peer>& peer, const control::Channel::Message& m) const;

 private:
  static constexpr size_t kTypes = 64;  // above every control::MsgType
  std::array<Handler, kTypes> handlers_;
};

// Registers Heartbeat (a sign of life only) and Bye (the peer closes in order).
void add_liveness_handlers(ControlDispatch& d);

}  // namespace hmc

// A listener waits for one connector's hello on the device's endpoint (a receive for the
// control tag carrying its random id), answers it with an ack, and hands the new endpoint out
// through accept(). One peer per listener, as net.h asks.
#pragma once

#include <cstdint>

#include "device.h"
#include "hmc/plugin/net.h"
#include "request.h"

namespace hmc::ofi {

class Endpoint;

class Listener {
 public:
  explicit Listener(Device& dev) : dev_(dev) {}
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Posts the hello receive and writes the connection handle.
  hmc_plugin_status_t start(void* handle, size_t* handle_len);
  // SUCCESS with *out once the hello arrived; IN_PROGRESS before.
  hmc_plugin_status_t accept(Endpoint** out);
  // Called by the device when the hello receive ends; releases or reposts r.
  void on_hello(Request* r, int err);

 private:
  void repost(Request* r);

  Device& dev_;
  uint64_t id_ = 0;
  Request* hello_ = nullptr;   // the posted hello receive
  Endpoint* ready_ = nullptr;  // established, not handed out yet
  bool handed_out_ = false;
  hmc_plugin_status_t failed_ = HMC_PLUGIN_SUCCESS;
  int bad_hellos_ = 0;
};

}  // namespace hmc::ofi

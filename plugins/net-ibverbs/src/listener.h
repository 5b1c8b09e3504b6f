// A listener (hmc_net_listener_t): a TCP socket on HMC_LISTEN_HOST whose address is the
// connection handle. One connector is accepted: its HELLO (queue pair info, checked) is answered
// with ACCEPT, and the endpoint is handed out once the connector confirms (READY).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hmc/plugin/net.h"
#include "sock.h"

namespace hmc::ibverbs {

class Device;
class Endpoint;

class Listener {
 public:
  explicit Listener(Device& dev);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  hmc_plugin_status_t start(void* handle, size_t* handle_len);
  int fd() const { return fd_; }
  // Accepts pending TCP connections and reads their HELLOs.
  void on_readable();
  hmc_plugin_status_t accept(Endpoint** out);

 private:
  Device& dev_;
  int fd_ = -1;
  uint64_t id_ = 0;
  std::vector<std::unique_ptr<SideChannel>> incoming_;  // HELLO not read yet
  Endpoint* pending_ = nullptr;                         // answered, waiting for READY
  bool handed_out_ = false;
};

}  // namespace hmc::ibverbs

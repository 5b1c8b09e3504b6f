// A non-blocking operation handed to the application as hmc_request_t.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "hmc/hmc.h"
#include "hmc/plugin/net.h"

namespace hmc {

struct Peer;

enum class Op { Send, Recv, Put, Get };
const char* op_name(Op op);

struct Request {
  Op op = Op::Send;
  std::shared_ptr<Peer> peer;
  size_t size = 0;
  uint64_t tag = 0;
  bool notify = false;
  uint64_t notify_value = 0;
  bool landed = false;  // a notifying put whose data is in place, waiting to notify in order

  hmc_net_request_t* net = nullptr;  // guarded by peer->net->mutex(); nullptr once ended
  hmc_net_mr_t* temp_mr = nullptr;   // a registration made for this request only
  std::atomic<bool> done{false};     // written last, with release order
  hmc_status_t status = HMC_IN_PROGRESS;
  size_t bytes = 0;
  std::string error;                 // message for hmc_last_error when status is an error
};

}  // namespace hmc

// A request handed to the core (hmc_net_request_t): a send, receive, put, get or notified put,
// owned by its endpoint until test reports it ended (or the endpoint closes).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "hmc/plugin/common.h"

namespace hmc::ibverbs {

class Endpoint;
struct Registration;

enum class ReqKind { kSend, kRecv, kPut, kGet };

struct Request {
  uint64_t id = 0;
  Endpoint* ep = nullptr;  // nullptr once its endpoint closed
  ReqKind kind = ReqKind::kSend;
  bool done = false;
  hmc_plugin_status_t result = HMC_PLUGIN_SUCCESS;
  size_t bytes = 0;  // reported by test

  uint64_t tag = 0;
  void* buf = nullptr;
  size_t len = 0;
  uint32_t lkey = 0;  // the caller's registration, when it covers buf
  bool has_lkey = false;
  Registration* own_reg = nullptr;  // acquired for this request, released when it ends
  int in_flight = 0;                // work requests posted and not completed
  bool matched = false;             // receive: a message was assigned to it
  bool awaiting_fin = false;        // rendezvous send: the receiver has not answered yet
  size_t sent_len = 0;              // receive: the length the sender sent
  uint64_t cookie = 0;              // receive of a rendezvous: the sender's request id
  size_t got = 0;                   // receive of a staged message: bytes of it that arrived
  bool notify_after = false;        // striped notified put: NOTIFY once every piece completed
  uint64_t notify_value = 0;

  // A rendezvous whose keys go segment by segment (kRts with key_len, then kRndvKey messages).
  bool segmented = false;
  size_t keyed = 0;          // bytes of the message whose keys were sent / arrived
  bool key_refused = false;  // the sender could not register the rest (a kRndvKey of length 0)
  // send: the bytes the receiver has read (kRndvAck), its own registrations of the segments it
  // has not read yet (with their end offsets), and whether a refused registration waits for an
  // ack to free some
  size_t acked = 0;
  std::deque<std::pair<size_t, Registration*>> seg_regs;
  bool wait_ack = false;
  // receive: where the message is, and the keyed segments not yet acknowledged to the sender:
  // their end offsets and the bytes of them still being read
  uint64_t remote_addr = 0;
  std::deque<std::pair<size_t, size_t>> unread;
  std::vector<uint64_t> rail_bytes;  // striped over rails: bytes given to the port, each rail
};

}  // namespace hmc::ibverbs

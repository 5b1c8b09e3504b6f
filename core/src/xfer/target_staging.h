// Target-side staging: a put or get into a peer's device memory that its net plugins cannot
// reach travels as one framed message on an internal tag, asked for and answered by StagedPut,
// StagedGet and StagedDone control messages (docs/protocols-wire.md), whose handlers this
// subsystem registers with the control dispatch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/channel.h"
#include "device/registry.h"
#include "framed/framed_transfer.h"
#include "framed/pieced_rma.h"
#include "net/region.h"
#include "regions/regions.h"
#include "request/request.h"

namespace hmc {

class Context;
class ControlDispatch;
struct Peer;
class Transfers;

// What target-side staging needs of the context: peer failure and progress (the layer above).
class StagingServices {
 public:
  virtual ~StagingServices() = default;
  virtual void fail_peer(Peer& peer, hmc_status_t status, const std::string& reason) = 0;
  virtual bool progress_until(const std::function<bool()>& done, uint64_t deadline_ns) = 0;
  // Held by every progress pass (which runs TargetStaging::advance).
  virtual std::mutex& progress_mutex() = 0;
};

class TargetStaging {
 public:
  // Its framed transfers are posted and ended by transfers.
  TargetStaging(StagingServices& services, Transfers& transfers, Regions& regions, Context* owner,
                int timeout_ms)
      : services_(services),
        transfers_(transfers),
        regions_(regions),
        owner_(owner),
        timeout_ms_(timeout_ms) {}
  TargetStaging(const TargetStaging&) = delete;
  TargetStaging& operator=(const TargetStaging&) = delete;

  // Registers the StagedPut/StagedGet/StagedDone handlers (they take the regions' protocol
  // mutex only).
  void add_handlers(ControlDispatch& dispatch);
  // Posts the initiator's side of a put/get on a staged Remote: an internal framed transfer on a
  // fresh internal tag, the application's request (ended by advance), and the StagedPut/StagedGet
  // message.
  hmc_status_t post(Remote* remote, void* buf, size_t size, uint64_t offset, Op op, bool notify,
                    uint64_t notify_value, std::string_view notify_bytes, Request** out);
  // The same for a transfer list (xfer/xfer_list.h): one ask and internal transfer per range of
  // `spans` (offsets into the local region [local, local + local_size)), and one application
  // request of `total` bytes that ends when the last range did, or with the first failure.
  hmc_status_t post_ranges(Remote* remote, void* local, size_t local_size, const RmaSpan* spans,
                           size_t count, size_t total, Op op, bool notify, uint64_t notify_value,
                           std::string_view notify_bytes, Request** out);
  // Serves the asks received, ends the application's requests whose transfer ended, answers
  // StagedDone for the owner's transfers that ended, releases internal requests (progress
  // pass: progress_mutex() held, no other lock). Returns true when something happened.
  bool advance();
  // hmc_mem_deregister of a staged region: waits (HMC_TIMEOUT_MS) for its internal transfers
  // (no lock held; the region is departing).
  void settle_region(Region* region);

 private:
  struct AskIn;
  std::string handle_message(const std::shared_ptr<Peer>& peer, const control::Channel::Message& m);
  // Checks an ask against the region and posts the owner's framed transfer (or, refused, the
  // answer and a transfer that ends the initiator's without touching the region).
  void serve(const AskIn& ask);
  // Ends an initiator's application request of a staged put/get (net mutex held).
  void end_user_locked(Request* user, hmc_status_t status, std::string error);

  StagingServices& services_;
  Transfers& transfers_;
  Regions& regions_;
  Context* owner_;  // of the requests it makes
  const int timeout_ms_;

  // Guarded by regions_.protocol_mutex() unless said.
  // Asks received (StagedPut/StagedGet), served by the next progress pass.
  struct AskIn {
    std::shared_ptr<Peer> peer;
    bool get = false;
    uint64_t tag = 0, region_id = 0, offset = 0, size = 0;
  };
  std::vector<AskIn> asks_;
  // Our staged puts/gets as initiator, by internal tag.
  struct Initiated {
    std::shared_ptr<Peer> peer;
    Op op = Op::Put;
    size_t size = 0;
    uint64_t offset = 0;  // into the owner's region
    // The ranges of one transfer list still running, shared by them; nullptr for a put or get.
    std::shared_ptr<size_t> left;
    Request* inner = nullptr;      // the internal framed send (put) / receive (get)
    Request* flush = nullptr;      // an empty send that ends the owner's receive
    hmc_request_t user = nullptr;  // the application's request; nullptr once we ended it
    bool answered = false;         // StagedDone arrived
    int32_t status = 0;
    std::string text;
  };
  std::unordered_map<uint64_t, std::shared_ptr<Initiated>> ops_;
  std::atomic<uint64_t> next_tag_{1};
  // Transfers we serve as owner; touched by advance only (under progress_mutex()).
  struct Served {
    std::shared_ptr<Peer> peer;
    uint64_t tag = 0;
    uint64_t region_id = 0;  // the region whose staged_inflight counts it; 0: refused
    size_t size = 0;
    bool get = false;
    Request* inner = nullptr;
  };
  std::vector<Served> served_;
};

}  // namespace hmc

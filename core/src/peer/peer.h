// One connected peer: its control channel, its capability record, the path chosen for it and
// the data endpoint on that path, and the requests pending on it.
//
// Locking: `net->mutex()` guards ep, pending and lost_reason (everything touching the plugin);
// ctrl_mutex guards the control channel. Lock order: Context::peers_mutex_ -> net->mutex() ->
// the regions' mutex -> ctrl_mutex -> Regions::protocol_mutex() (a leaf; regions/regions.h).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/channel.h"
#include "net/net_plugin.h"
#include "path/path.h"
#include "peer/framing_state.h"
#include "peer/notify_order.h"
#include "peer/post_test_learner.h"
#include "util/metrics.h"

namespace hmc {

class Context;
struct Request;

struct Peer : std::enable_shared_from_this<Peer> {
  // What every send, receive and completion reads comes first, in the fewest cache lines: after
  // a system call (a poll, a receive) each further line the path touches is a cache miss.
  Context* ctx = nullptr;
  NetPlugin* net = nullptr;
  hmc_net_ep_t* ep = nullptr;       // guarded by net->mutex()
  std::vector<Request*> pending;    // guarded by net->mutex()
  std::atomic<bool> lost{false};    // set once the peer is gone; posts fail from then on
  std::atomic<bool> closed{false};  // hmc_peer_close was called
  // The peer said Bye: nothing new goes to it, but what it sent before can still be received.
  std::atomic<bool> remote_closed{false};
  // Requests not yet ended. Written under net->mutex() only (so no read-modify-write atomics
  // on the path of every message), read anywhere.
  std::atomic<uint32_t> pending_count{0};
  void add_pending_locked(int delta) {
    pending_count.store(pending_count.load(std::memory_order_relaxed) + uint32_t(delta),
                        std::memory_order_relaxed);
  }
  // Requests ended on the data path (written under net->mutex()): a completion is a sign of
  // life too, but reading the clock for each costs more than a small message. The progress pass
  // turns a change of this count into last_heard_ns.
  std::atomic<uint64_t> completions{0};
  PeerFramingState framing;  // guarded by net->mutex() (chunk, first: set at connect)

  std::string name;     // "pid 123 on host (tcp 192.0.2.7:40112)"
  std::string address;  // where it was dialled or came from: "tcp 192.0.2.7:40112", "unix pid 77"
  path::Capabilities remote;
  path::Choice choice;
  bool same_host = false;
  NetDevice* net_device = nullptr;
  // Puts with HMC_PUT_NOTIFY in the order they were posted; a put's notification is sent only
  // after those of every earlier one, so the target sees them in order. Guarded by net->mutex().
  std::deque<Request*> notify_queue;
  NotifySender notify_sender;         // guarded by net->mutex() (but its acked())
  NotifyReceiver notify_receiver;     // guarded by NotificationQueue's mutex (xfer/transfers.h)
  std::string lost_reason;            // guarded by net->mutex()
  PostTestLearner post_test_learner;  // guarded by net->mutex()

  std::mutex ctrl_mutex;
  std::unique_ptr<control::Channel> ctrl;  // guarded by ctrl_mutex
  std::atomic<uint64_t> last_heard_ns{0};  // last sign of life: a message or a completion
  uint64_t completions_seen = 0;           // Progress::service_control's (passes are serialized)
  uint64_t last_sent_ns = 0;               // guarded by ctrl_mutex
  // Transfers that ended, for the metrics (util/metrics.h); written under net->mutex().
  TransferCounters transfers_ended;
};

}  // namespace hmc

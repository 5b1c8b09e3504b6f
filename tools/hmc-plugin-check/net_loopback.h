// One loopback connection of a net plugin, and what the checks run over it share: the two
// contexts, the endpoints, bounded waits with progress, and host buffers registered when the
// device needs it. net_check.cpp makes the connection; net_messages.cpp and net_rma.cpp check
// what travels over it.
#pragma once

#include <string>
#include <vector>

#include "hmc/plugin/net.h"
#include "report.h"
#include "wait.h"

namespace hmc::check {

struct Loopback {
  const hmc_net_plugin_v2_t* t;
  hmc_net_ctx_t* server_ctx;  // the loader's context: listens, accepts, owns the target memory
  hmc_net_ctx_t* client_ctx;  // a second context: connects, sends, puts and gets
  int dev;                    // the device both ends use
  const std::vector<hmc_net_device_props_t>& props;  // every device's
  const Waiter& waiter;
  Report& report;
  std::string prefix;  // of the check ids: "dev1." when several devices are checked

  hmc_net_listener_t* listener = nullptr;
  hmc_net_ep_t* server = nullptr;  // accepted, in server_ctx
  hmc_net_ep_t* client = nullptr;  // connected, in client_ctx

  const hmc_net_device_props_t& device() const { return props[static_cast<size_t>(dev)]; }
  std::string id(const char* name) const { return prefix + name; }

  // Progress of both contexts, between polls.
  void progress() const {
    if (t->progress == nullptr) return;
    t->progress(server_ctx);
    t->progress(client_ctx);
  }

  // Progresses both contexts for about ms milliseconds, so that what was sent has arrived before
  // anything is posted to receive it (with no progress slot, nothing moves until test).
  void settle(int ms) const {
    const auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < until) {
      progress();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // Tests req until it ends, progressing. True with its status in *st and the bytes it moved in
  // *bytes when it ended within the limit; false when it is still pending.
  bool wait(hmc_net_request_t* req, int* st, size_t* bytes) const {
    return waiter.until(
        [&] {
          int done = 0;
          int s = t->test(req, &done, bytes);
          if (done == 0 && (s == HMC_PLUGIN_SUCCESS || s == HMC_PLUGIN_IN_PROGRESS))
            return static_cast<int>(HMC_PLUGIN_IN_PROGRESS);  // pending
          // Ended (or an error without done): it is never tested again.
          return s == HMC_PLUGIN_IN_PROGRESS ? static_cast<int>(HMC_PLUGIN_ERR_INTERNAL) : s;
        },
        [&] { progress(); }, st);
  }
};

// Host memory, registered with the loopback's device in one context when asked.
class Buffer {
 public:
  explicit Buffer(size_t n) : bytes_(n) {}
  ~Buffer() {
    if (mr_ != nullptr) t_->dereg_mr(ctx_, mr_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Registers the buffer with the loopback's device in ctx (with the given access) when the
  // device sets HMC_NET_FLAG_NEEDS_REG, or always. A failure is reported under id.
  bool reg(const Loopback& lb, hmc_net_ctx_t* ctx, uint32_t access, bool always, const char* id);

  unsigned char* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  hmc_net_mr_t* mr() const { return mr_; }

 private:
  std::vector<unsigned char> bytes_;
  const hmc_net_plugin_v2_t* t_ = nullptr;
  hmc_net_ctx_t* ctx_ = nullptr;
  hmc_net_mr_t* mr_ = nullptr;
};

// A descriptor of host memory for reg_mr.
hmc_net_mem_desc_t host_mem_desc(void* addr, size_t len, uint32_t access);

// Tagged messages: both posting orders, ordering per tag, messages that arrived before their
// receive, a large and a zero-byte message, truncation, cancel (needs HMC_NET_FLAG_TAGGED).
void check_messages(Loopback& lb);
// With wait_fd and arm: a message from the peer wakes an armed context's fd.
void check_wakeup(Loopback& lb);
// Once the peer closed its end (closes lb.client): a pending receive ends PEER_LOST, messages
// that arrived before stay receivable, later posts end PEER_LOST.
void check_peer_lost(Loopback& lb);
// Registration per device, put, get and the refusal of out-of-bounds accesses (needs
// HMC_NET_FLAG_RMA).
void check_rma(Loopback& lb);

}  // namespace hmc::check

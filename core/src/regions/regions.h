// The regions subsystem: memory this context registered (hmc_region_t) and the regions of peers
// it imported (hmc_remote_t), with the protocol that withdraws a region from every peer that
// imported it before it is deregistered (the Region* control messages; regions/regions.cpp
// describes it). Its handlers are registered with the control dispatch at wiring time.
//
// Locks: mutex_ (regions_ and remotes_) is taken after a peer's net mutex; protocol_mutex() is a
// leaf, taken under any other lock (a handler runs with a ctrl_mutex held), none taken under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "control/channel.h"
#include "device/registry.h"
#include "hmc/hmc.h"
#include "net/net_plugin.h"
#include "net/region.h"

namespace hmc {

class Context;
class ControlDispatch;
struct Peer;

// What the regions subsystem needs of the context that wires it.
class RegionServices {
 public:
  virtual ~RegionServices() = default;
  // Drives progress from this thread until done() holds or the deadline passes.
  virtual bool progress_until(const std::function<bool()>& done, uint64_t deadline_ns) = 0;
  // Marks the peer lost (no lock held).
  virtual void fail_peer(Peer& peer, hmc_status_t status, const std::string& reason) = 0;
  // Waits until target-side staging runs no transfer into or out of a departing staged region
  // (no lock held).
  virtual void settle_staged_region(Region* region) = 0;
};

class Regions {
 public:
  struct Settings {
    Context* owner = nullptr;  // stamped on each Region (the API finds its context there)
    uint64_t context_id = 0;
    int timeout_ms = 0;  // HMC_TIMEOUT_MS
    bool dmabuf = true;  // HMC_NET_DMABUF
  };
  Regions(RegionServices& services, DeviceRegistry& devices,
          const std::vector<std::unique_ptr<NetPlugin>>& nets, const Settings& settings);
  Regions(const Regions&) = delete;
  Regions& operator=(const Regions&) = delete;

  // Registers the Region* control messages' handlers.
  void add_handlers(ControlDispatch& dispatch);

  hmc_status_t register_memory(void* addr, size_t size, uint32_t access, Region** out);
  // Withdraws the region from its importers (waits for them, HMC_TIMEOUT_MS), then ends it.
  hmc_status_t deregister_memory(Region* region);
  hmc_status_t import_remote(const std::shared_ptr<Peer>& peer, const void* desc, size_t len,
                             Remote** out);
  hmc_status_t release_remote(Remote* remote);

  // Acknowledges the withdrawals whose Remotes have no operation left running (progress pass;
  // no lock held). Returns true when it sent something.
  bool settle_withdrawals();
  // Releases the keys of the peer's Remotes (its net mutex held): they go before its endpoint.
  void release_keys_locked(const Peer& peer);
  // The registration on nd of a region holding [buf, buf+size), or nullptr.
  hmc_net_mr_t* registration_covering(const NetDevice* nd, const void* buf, size_t size);
  // Frees every Remote and Region (context teardown: no other thread runs, peers are failed).
  void release_all();

  // For target-side staging: the protocol lock, and a registered or departing region by id
  // (that lock held), or nullptr.
  std::mutex& protocol_mutex() { return proto_mutex_; }
  Region* find_locked(uint64_t region_id) const;

 private:
  std::string handle_message(const std::shared_ptr<Peer>& peer, const control::Channel::Message& m);
  // Withdraws a departing region from the importers in `told` and waits for them (no lock held).
  void withdraw(Region* region);
  // Takes an imported Remote out of remotes_ and frees it (no lock held); tell_owner: send
  // RegionRelease when the owner tracks it.
  void drop_remote(Remote* remote, bool tell_owner);

  RegionServices& services_;
  DeviceRegistry& devices_;
  const std::vector<std::unique_ptr<NetPlugin>>& nets_;
  const Settings settings_;

  std::mutex mutex_;
  std::unordered_set<Region*> regions_;
  std::unordered_set<Remote*> remotes_;

  std::mutex proto_mutex_;
  uint64_t next_region_id_ = 1;
  std::unordered_map<uint64_t, Region*> regions_by_id_;  // registered and departing regions
  // Our imports waiting for the owner's RegionReply, by token.
  struct ImportWait {
    bool answered = false;
    int32_t status = 0;
    std::string text;
  };
  uint64_t next_import_token_ = 1;
  std::unordered_map<uint64_t, ImportWait> import_waits_;
  // RegionGone messages received, to be acknowledged once their Remotes are idle.
  struct Withdrawal {
    std::weak_ptr<Peer> peer;  // weak: a pending acknowledgement does not keep a peer alive
    uint64_t region_id;
  };
  std::vector<Withdrawal> withdrawals_;
  std::atomic<bool> withdrawals_pending_{false};
};

// Fails with HMC_ERR_REMOTE: `what` ("put", "get") on r, whose owner withdrew the region.
hmc_status_t refuse_withdrawn(const Remote& r, const char* what);
// Records req as running on r (peer->net->mutex() held); prunes ended requests now and then.
void track_remote_request_locked(Remote* r, hmc_request_t req);
// Whether an operation on r may still be running (peer->net->mutex() held); prunes.
bool remote_busy_locked(Remote* r);

}  // namespace hmc

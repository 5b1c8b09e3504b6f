// Registered memory (hmc_region_t) and its packed remote descriptor, and the imported view of a
// peer's region (hmc_remote_t).
//
// Withdrawal. One-sided access is not seen by the owner of the memory on every path (net-ucx
// and net-ofi over tcp and shared memory check at the initiator only), so the owner cannot
// refuse an access through a descriptor of a region it deregistered. Instead the owner keeps
// track of who imported each region (the importer tells it, RegionRequest, before
// hmc_remote_import returns), and hmc_mem_deregister withdraws the region from each of them
// (RegionGone) and waits for their acknowledgement (RegionGoneAck: the importer's Remotes of
// it are dead and none of their operations is still running) before it ends the registration.
// regions/regions.cpp has the protocol.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "net/net_plugin.h"

namespace hmc {

class Context;
struct Peer;

struct Region {
  Context* ctx = nullptr;
  void* addr = nullptr;
  size_t size = 0;
  uint32_t access = 0;
  // In the descriptor: the owning context's id and the region's, unique in its context and
  // never reused (0: not tracked, the descriptor has the layout of owners that do not track).
  uint64_t context_id = 0;
  uint64_t id = 0;
  // One per net device that registered the memory, each with that device's key.
  struct Registration {
    NetDevice* dev;
    hmc_net_mr_t* mr;
    std::vector<uint8_t> rkey;
  };
  std::vector<Registration> registrations;
  // The registration on dev, or nullptr.
  const Registration* registration_on(const NetDevice* dev) const;

  // Who imported it (guarded by Regions::protocol_mutex()).
  struct Importer {
    std::shared_ptr<Peer> peer;
    uint32_t count = 0;  // imports not yet released
    bool told = false;   // RegionGone was sent to it
    bool acked = false;  // it answered RegionGoneAck
  };
  std::vector<Importer> importers;
  bool departing = false;  // hmc_mem_deregister started: new imports are refused

  // Target-side staging, for device memory: peers whose path has no registration of it (the net
  // device reaches it neither natively nor by dma-buf, or registering failed) reach it through
  // StagedPut/StagedGet (xfer/target_staging.cpp), which the owner's progress engine serves with
  // framed transfers into or out of it.
  bool staged = false;
  // Internal transfers into or out of it still running (guarded by Regions::protocol_mutex());
  // hmc_mem_deregister waits for them to end. Departing regions refuse new ones.
  uint32_t staged_inflight = 0;
};

// A dma-buf of a region's device memory, exported at most once while it is registered.
struct DmabufExport {
  bool tried = false;
  int fd = -1;  // closed on destruction (the net devices keep their own reference)
  uint64_t offset = 0;
  std::string error;
  DmabufExport() = default;
  DmabufExport(const DmabufExport&) = delete;
  DmabufExport& operator=(const DmabufExport&) = delete;
  ~DmabufExport();
};

// Descriptor flags (in the trailer after the ids).
constexpr uint32_t kRegionFlagStaged = 1u << 0;  // reached through StagedPut/StagedGet

struct Remote {
  std::shared_ptr<Peer> peer;
  uint64_t base = 0;
  uint64_t size = 0;
  uint32_t access = 0;
  hmc_net_rkey_t* rkey = nullptr;  // released under peer->net->mutex()

  // The owner's id of the region (every region descriptor carries it): the withdrawal messages
  // name the region by it.
  uint64_t region_id = 0;
  // Set (under peer->net->mutex()) once the owner withdrew the region: hmc_put/hmc_get on it
  // are refused from then on.
  std::atomic<bool> dead{false};
  // Operations posted on it and maybe still running: request handles, pruned of ended ones
  // now and then (guarded by peer->net->mutex()).
  std::vector<hmc_request_t> inflight;
  size_t prune_at = 16;
  // Posts between their check of `dead` and the record of their request in `inflight` (a
  // framed put/get records it after posting, outside the net mutex).
  std::atomic<uint32_t> posting{0};
  // The region is served by target-side staging (its descriptor says so).
  bool staged = false;
  // The region is device memory (its descriptor's kRegionFlagStaged) reached by key: a put or
  // get on it moves device memory NIC to device.
  bool device = false;
};

// Descriptor layout (version 2): magic, version, base, size, access, then (plugin name, device
// name, rkey) per registered net device, then, when the region has an id, the owner's context
// id, the region id and the region's flags (kRegionFlag*). Version 1 (one key per plugin, net
// ABI 1) is refused with HMC_ERR_VERSION.
std::vector<uint8_t> pack_region(const Region& r);
// The most keys a descriptor may carry; unpacking more fails, loudly.
constexpr uint32_t kMaxRegionKeys = 4096;
struct PackedRegion {
  struct Key {
    std::string plugin;
    std::string device;
    std::vector<uint8_t> rkey;
  };
  uint64_t base = 0;
  uint64_t size = 0;
  uint32_t access = 0;
  std::vector<Key> rkeys;
  // The key for a path ("plugin", "device"), or nullptr.
  const std::vector<uint8_t>* key_for(const std::string& plugin, const std::string& device) const;
  uint64_t context_id = 0;  // both 0: packed by an owner that does not track imports
  uint64_t region_id = 0;
  uint32_t flags = 0;  // kRegionFlag*
};
hmc_status_t unpack_region(const void* data, size_t len, PackedRegion* out);

}  // namespace hmc

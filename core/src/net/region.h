// Registered memory (hmc_region_t) and its packed remote descriptor, and the imported view of a
// peer's region (hmc_remote_t).
#pragma once

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
  struct Registration {
    NetPlugin* net;
    hmc_net_mr_t* mr;
    std::vector<uint8_t> rkey;
  };
  std::vector<Registration> registrations;  // one per net plugin that registers memory
};

struct Remote {
  std::shared_ptr<Peer> peer;
  uint64_t base = 0;
  uint64_t size = 0;
  uint32_t access = 0;
  hmc_net_rkey_t* rkey = nullptr;  // released under peer->net->mutex()
};

// Descriptor layout: magic, version, base, size, access, then (plugin name, rkey) per plugin.
std::vector<uint8_t> pack_region(const Region& r);
struct PackedRegion {
  uint64_t base = 0;
  uint64_t size = 0;
  uint32_t access = 0;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> rkeys;
};
hmc_status_t unpack_region(const void* data, size_t len, PackedRegion* out);

}  // namespace hmc

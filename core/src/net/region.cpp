#include "net/region.h"

#include <algorithm>

#include "control/wire.h"
#include "util/status.h"

namespace hmc {
namespace {
constexpr uint32_t kRegionMagic = 0x52434d48;  // "HMCR"
constexpr uint16_t kRegionVersion = 3;
}  // namespace

std::vector<uint8_t> pack_region(const Region& r) {
  control::Writer w;
  w.u32(kRegionMagic);
  w.u16(kRegionVersion);
  w.u64(reinterpret_cast<uint64_t>(r.addr));
  w.u64(r.size);
  w.u32(r.access);
  w.u32(static_cast<uint32_t>(r.registrations.size()));
  for (const auto& reg : r.registrations) {
    w.str(reg.dev->plugin->name());
    w.str(reg.dev->name);
    w.blob(reg.rkey);
  }
  w.u64(r.context_id);
  w.u64(r.id);  // 0: the owner does not track imports
  w.u32(r.staged ? kRegionFlagStaged : 0);
  return w.data();
}

hmc_status_t unpack_region(const void* data, size_t len, PackedRegion* out) {
  control::Reader r(static_cast<const uint8_t*>(data), len);
  uint32_t magic = 0, n = 0;
  uint16_t version = 0;
  if (!r.u32(&magic) || magic != kRegionMagic)
    return fail(
        HMC_ERR_INVALID_ARGUMENT,
        "hmc_remote_import: the {}-byte blob is not a region descriptor from hmc_region_pack", len);
  if (!r.u16(&version) || version != kRegionVersion)
    return fail(HMC_ERR_VERSION, "hmc_remote_import: descriptor version {}, this library reads {}",
                version, kRegionVersion);
  PackedRegion p;
  if (!r.u64(&p.base) || !r.u64(&p.size) || !r.u32(&p.access) || !r.u32(&n))
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_remote_import: descriptor truncated or corrupt");
  if (n > kMaxRegionKeys)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_remote_import: the descriptor carries {} keys, more "
                "than the {} this library reads",
                n, kMaxRegionKeys);
  for (uint32_t i = 0; i < n; ++i) {
    PackedRegion::Key k;
    if (!r.str(&k.plugin, 256) || !r.str(&k.device, 256) || !r.blob(&k.rkey, HMC_NET_RKEY_MAX))
      return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_remote_import: descriptor truncated or corrupt");
    p.rkeys.push_back(std::move(k));
  }
  // The owner's ids (region 0: it does not track imports) and the region's flags; nothing
  // follows them.
  if (!r.u64(&p.context_id) || !r.u64(&p.region_id) || !r.u32(&p.flags) || r.remaining() != 0)
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_remote_import: descriptor truncated or corrupt");
  if (p.base + p.size < p.base)
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_remote_import: descriptor region wraps around");
  *out = std::move(p);
  return HMC_SUCCESS;
}

const std::vector<uint8_t>* PackedRegion::key_for(const std::string& plugin,
                                                  const std::string& device) const {
  for (const auto& k : rkeys)
    if (k.plugin == plugin && k.device == device) return &k.rkey;
  return nullptr;
}

const Region::Registration* Region::registration_on(const NetDevice* dev) const {
  for (const auto& reg : registrations)
    if (reg.dev == dev) return &reg;
  return nullptr;
}

}  // namespace hmc

#include "region.h"

#include <cstring>
#include <memory>
#include <string>

#include "context.h"
#include "device.h"
#include "endpoint.h"
#include "wire.h"

namespace hmc::ofi {

MemRegion::~MemRegion() {
  for (Reg& r : regs)
    if (r.mr != nullptr) fi_close(&r.mr->fid);
}

void* MemRegion::desc_for(const Device* d) const {
  for (const Reg& r : regs)
    if (r.dev == d) return fi_mr_desc(r.mr);
  return nullptr;
}

bool remote_range_ok(const RemoteKey& k, uint64_t addr, size_t len) {
  if (addr < k.base) return false;
  const uint64_t off = addr - k.base;
  return off <= k.size && static_cast<uint64_t>(len) <= k.size - off;
}

hmc_plugin_status_t register_region(Context& ctx, int dev, const hmc_net_mem_desc_t* mem,
                                    MemRegion** out, void* rkey, size_t* rkey_len) {
  const Log& log = ctx.log();
  const uintptr_t base = reinterpret_cast<uintptr_t>(mem->addr);
  if (mem->addr == nullptr || mem->len == 0 || mem->len > UINTPTR_MAX - base) {
    log.write(HMC_LOG_ERROR, "reg_mr: invalid range (%p, %zu bytes)", mem->addr, mem->len);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  const uint32_t kind = mem->iface;
  if (mem->dmabuf_fd >= 0 ||
      (kind != HMC_MEM_IFACE_HOST && kind != HMC_MEM_IFACE_CUDA && kind != HMC_MEM_IFACE_ROCM)) {
    // dma-buf registration (FI_MR_DMABUF) arrived after libfabric 1.17.
    OFI_DEBUG(log, "reg_mr: memory of interface %u (dma-buf fd %d) is not supported", kind,
              mem->dmabuf_fd);
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  const bool remote =
      (mem->access & (HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE)) != 0;
  auto region = std::make_unique<MemRegion>();
  region->base = base;
  region->len = mem->len;
  region->access = mem->access;
  region->iface = kind;
  region->ordinal = mem->device_ordinal;
  PackedRkey packed;
  packed.base = base;
  packed.size = mem->len;
  packed.access = mem->access & (HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE);
  std::string failures;
  do {  // with the one device: break leaves it
    Device& d = *ctx.device(dev);
    if ((d.mem_ifaces() & HMC_MEM_IFACE_BIT(kind)) == 0) {
      OFI_DEBUG(log, "reg_mr: device %s does not reach memory of interface %u", d.name().c_str(),
                kind);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    const bool serves_remote = remote && d.rma();
    // Registering helps a device only for one-sided access or for local descriptors.
    if (!serves_remote && !d.needs_local_desc()) break;
    uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    bool readable = false;
    if (serves_remote) {
      if (mem->access & HMC_NET_ACCESS_REMOTE_WRITE) access |= FI_REMOTE_WRITE;
      // A put completed by a trailing read needs the provider to allow reads of a writable
      // region; what peers may do is still checked from the packed access bits.
      if ((mem->access & HMC_NET_ACCESS_REMOTE_READ) ||
          ((mem->access & HMC_NET_ACCESS_REMOTE_WRITE) && d.read_completion())) {
        access |= FI_REMOTE_READ;
        readable = true;
      }
    }
    fid_mr* mr = nullptr;
    std::string why;
    if (!d.register_memory(mem->addr, mem->len, access, kind, mem->device_ordinal, &mr, &why)) {
      failures = d.name() + ": " + why;
      break;
    }
    region->regs.push_back({&d, mr});
    if (serves_remote) {
      RkeyEntry e;
      e.device = d.name();
      e.key = fi_mr_key(mr);
      e.virt_addr = d.virt_addr();
      e.readable = readable;
      packed.entries.push_back(std::move(e));
    }
  } while (false);
  if (!failures.empty()) {
    log.write(HMC_LOG_ERROR, "reg_mr: %zu bytes at %p could not be registered with %s", mem->len,
              mem->addr, failures.c_str());
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  uint8_t buf[HMC_NET_RKEY_MAX];
  size_t n = encode_rkey(packed, buf, sizeof(buf));
  if (n == 0) return HMC_PLUGIN_ERR_INTERNAL;
  std::memcpy(rkey, buf, n);
  *rkey_len = n;
  *out = region.release();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t unpack_remote_key(Endpoint& ep, const void* rkey, size_t len, RemoteKey** out) {
  Device& d = ep.dev();
  const Log& log = d.log();
  PackedRkey packed;
  std::string why;
  if (!decode_rkey(static_cast<const uint8_t*>(rkey), len, &packed, &why)) {
    log.write(HMC_LOG_ERROR, "rkey_unpack: %s (%zu bytes)", why.c_str(), len);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  std::string have;
  for (const RkeyEntry& e : packed.entries) {
    if (e.device != d.name()) {
      have += (have.empty() ? "" : ", ") + e.device;
      continue;
    }
    auto k = std::make_unique<RemoteKey>();
    k->dev = &d;
    k->key = e.key;
    k->base = packed.base;
    k->size = packed.size;
    k->access = packed.access;
    k->virt_addr = e.virt_addr;
    k->readable = e.readable;
    *out = k.release();
    return HMC_PLUGIN_SUCCESS;
  }
  log.write(HMC_LOG_ERROR,
            "rkey_unpack: the remote key has no registration for device '%s' "
            "(it has: %s)",
            d.name().c_str(), have.empty() ? "none" : have.c_str());
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

}  // namespace hmc::ofi

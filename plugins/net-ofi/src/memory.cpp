// Device: memory (the pool of bounce buffers, local descriptors, and registering memory the
// way the provider's mr_mode asks, for rendezvous and for peers' access).
#include <cerrno>
#include <cstdlib>
#include <new>
#include <string>

#include "device.h"
#include "util.h"

namespace hmc::ofi {

Bounce Device::bounce_get() {
  if (bounce_free_.empty()) {
    // A slab of chunks, registered once when the provider needs local descriptors.
    const size_t count = std::max<size_t>(8, (size_t{2} << 20) / bounce_size_);
    Slab sl;
    if (::posix_memalign(reinterpret_cast<void**>(&sl.mem), 4096, count * bounce_size_) != 0)
      throw std::bad_alloc();
    if (needs_local_desc_) {
      std::string why;
      if (!register_local(sl.mem, count * bounce_size_, &sl.mr, &why)) {
        std::free(sl.mem);
        log().write(HMC_LOG_ERROR, "%s: cannot register bounce buffers: %s", name().c_str(),
                    why.c_str());
        throw std::bad_alloc();
      }
    }
    void* desc = sl.mr != nullptr ? fi_mr_desc(sl.mr) : nullptr;
    for (size_t i = count; i-- > 0;) bounce_free_.push_back({sl.mem + i * bounce_size_, desc});
    slabs_.push_back(sl);
  }
  Bounce b = bounce_free_.back();
  bounce_free_.pop_back();
  return b;
}

void Device::bounce_put(Bounce b) {
  bounce_free_.push_back(b);
}

hmc_plugin_status_t Device::register_rndv(Request* r, size_t len, uint64_t access) {
  std::string why;
  if (!register_memory(r->buf, len, access, r->iface, r->ordinal, &r->own_mr, &why)) {
    log().write(HMC_LOG_ERROR, "%s: cannot register a %zu-byte buffer for the peer's %s: %s",
                name().c_str(), len, (access & FI_REMOTE_READ) ? "read" : "write", why.c_str());
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  r->key = fi_mr_key(r->own_mr);
  r->remote_addr = virt_addr() ? reinterpret_cast<uintptr_t>(r->buf) : 0;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Device::local_desc(const void* buf, size_t len, void* mr_desc, Request* r) {
  r->desc = nullptr;
  if (mr_desc != nullptr) {
    r->desc = mr_desc;
    return HMC_PLUGIN_SUCCESS;
  }
  if (!needs_local_desc_ || len == 0) return HMC_PLUGIN_SUCCESS;
  return cache_->acquire(buf, len, &r->desc, &r->cached);
}

bool Device::register_memory(void* addr, size_t len, uint64_t access, uint32_t iface, int ordinal,
                             fid_mr** out, std::string* why) {
  iovec iov{addr, len};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.offset = 0;  // without FI_MR_VIRT_ADDR, peers address the region from offset 0
  attr.iface = FI_HMEM_SYSTEM;
  if (iface == HMC_MEM_IFACE_CUDA) {
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = ordinal;
  } else if (iface == HMC_MEM_IFACE_ROCM) {
    attr.iface = FI_HMEM_ROCR;
  }
  const bool prov_key = (mr_mode_ & FI_MR_PROV_KEY) != 0;
  const uint64_t key_mask = key_bytes_ >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * key_bytes_)) - 1;
  int rc = -FI_ENOKEY;
  fid_mr* mr = nullptr;
  // Requested keys are random, so a key that outlived its registration (a peer holding a
  // stale rkey) is unlikely to name a later one; a collision is retried.
  for (int attempt = 0; attempt < 8; ++attempt) {
    attr.requested_key = prov_key ? 0 : (random_u64() & key_mask);
    rc = fi_mr_regattr(domain_.get(), &attr, 0, &mr);
    if (rc != -FI_ENOKEY && rc != -EKEYREJECTED && rc != -FI_EBUSY) break;
  }
  if (rc != 0) {
    *why = std::string("fi_mr_regattr: ") + fi_err(rc);
    return false;
  }
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) {
      fi_close(&mr->fid);
      *why = std::string("binding the registration to the endpoint: ") + fi_err(rc);
      return false;
    }
  }
  *out = mr;
  return true;
}
}  // namespace hmc::ofi

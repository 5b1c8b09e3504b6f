#include "mr_cache.h"

#include <unistd.h>

#include <string>

#include "device.h"

namespace hmc::ofi {

MrCache::~MrCache() {
  for (CachedMr* e : entries_) {
    if (e->mr != nullptr) fi_close(&e->mr->fid);
    delete e;
  }
}

hmc_plugin_status_t MrCache::acquire(const void* buf, size_t len, void** desc, CachedMr** held) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(buf);
  if (len > UINTPTR_MAX - b) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  for (CachedMr* e : entries_) {
    if (e->start <= b && b + len <= e->end) {
      ++e->refs;
      e->last_use = ++clock_;
      *desc = e->desc;
      *held = e;
      return HMC_PLUGIN_SUCCESS;
    }
  }
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = b & ~(page - 1);
  const uintptr_t end = (b + len + page - 1) & ~(page - 1);
  auto* e = new CachedMr;
  e->start = start;
  e->end = end;
  std::string why;
  if (!dev_.register_local(reinterpret_cast<void*>(start), end - start, &e->mr, &why)) {
    dev_.log().write(HMC_LOG_ERROR, "%s: cannot register the local buffer %p (%zu bytes): %s",
                     dev_.name().c_str(), buf, len, why.c_str());
    delete e;
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  e->desc = fi_mr_desc(e->mr);
  e->refs = 1;
  e->last_use = ++clock_;
  e->cached = capacity_ > 0;
  if (e->cached) {
    entries_.push_back(e);
    if (entries_.size() > capacity_) evict();
  }
  *desc = e->desc;
  *held = e;
  return HMC_PLUGIN_SUCCESS;
}

void MrCache::release(CachedMr* e) {
  if (--e->refs > 0 || e->cached) return;
  fi_close(&e->mr->fid);
  delete e;
}

void MrCache::evict() {
  // Least recently used entries nobody holds, until back at capacity. Entries still in use
  // stay (the cache grows past its capacity rather than blocking).
  while (entries_.size() > capacity_) {
    size_t victim = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i]->refs == 0 &&
          (victim == entries_.size() || entries_[i]->last_use < entries_[victim]->last_use))
        victim = i;
    if (victim == entries_.size()) return;
    CachedMr* e = entries_[victim];
    entries_.erase(entries_.begin() + static_cast<long>(victim));
    fi_close(&e->mr->fid);
    delete e;
  }
}

}  // namespace hmc::ofi

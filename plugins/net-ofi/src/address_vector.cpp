// Device: the address vector (remote endpoint addresses shared by connections, removed once
// unused) and the receive slots that tell connections apart in the tag space.
#include <string>
#include <vector>

#include "device.h"
#include "wire.h"

namespace hmc::ofi {

AvEntry* Device::av_acquire(const std::vector<uint8_t>& addr, std::string* why) {
  std::string key(addr.begin(), addr.end());
  auto it = av_map_.find(key);
  if (it != av_map_.end()) {
    ++it->second->refs;
    return it->second.get();
  }
  auto e = std::make_unique<AvEntry>();
  e->addr = key;
  int n = fi_av_insert(av_.get(), addr.data(), 1, &e->fi_addr, 0, nullptr);
  if (n != 1 || e->fi_addr == FI_ADDR_NOTAVAIL) {
    *why = std::string("fi_av_insert: ") + (n < 0 ? fi_err(n) : "the address was not accepted");
    return nullptr;
  }
  e->refs = 1;
  AvEntry* raw = e.get();
  av_map_.emplace(std::move(key), std::move(e));
  return raw;
}

void Device::av_release(AvEntry* e) {
  if (e == nullptr) return;
  if (--e->refs > 0) return;
  // Removing the address closes the provider's connection to it; operations still inside the
  // provider towards it are let finish first.
  if (orphans_ == 0)
    purge_av();
  else
    av_purge_pending_ = true;
}

void Device::purge_av() {
  av_purge_pending_ = false;
  for (auto it = av_map_.begin(); it != av_map_.end();) {
    if (it->second->refs > 0) {
      ++it;
      continue;
    }
    fi_addr_t a = it->second->fi_addr;
    int rc = fi_av_remove(av_.get(), &a, 1, 0);
    if (rc != 0) OFI_DEBUG(log(), "%s: fi_av_remove: %s", name().c_str(), fi_err(rc));
    it = av_map_.erase(it);
  }
}

int Device::slot_acquire(AvEntry* e) {
  uint16_t& used = choice_.directed ? e->slots : device_slots_;
  int& next = choice_.directed ? e->next_slot : device_next_slot_;
  for (int i = 0; i < kDataSlots; ++i) {
    int s = (next + i) % kDataSlots;
    if ((used & (1u << s)) == 0) {
      used = static_cast<uint16_t>(used | (1u << s));
      next = (s + 1) % kDataSlots;
      return s;
    }
  }
  return -1;
}

void Device::slot_release(AvEntry* e, int slot) {
  if (slot < 0) return;
  uint16_t& used = choice_.directed ? e->slots : device_slots_;
  used = static_cast<uint16_t>(used & ~(1u << slot));
}
}  // namespace hmc::ofi

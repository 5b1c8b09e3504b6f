#include "device/stage_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "device/registry.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {
size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  return page;
}

// Slabs of about this size: registration (cuMemHostRegister and kin) costs a few milliseconds a
// call, so buffers come several at a time rather than one by one, yet a pool that a context
// barely uses stays small.
constexpr size_t kSlabBytes = 16u << 20;
}  // namespace

StagePool::StagePool(DeviceRegistry& devices, size_t chunk, size_t pool_bytes)
    : chunk_(std::max<size_t>(chunk, 1)),
      stride_((chunk_ + page_size() - 1) / page_size() * page_size()),
      max_buffers_(std::max<size_t>(pool_bytes / chunk_, 1)),
      buffers_per_slab_(std::min(max_buffers_, std::max<size_t>(kSlabBytes / stride_, 1))) {
  // One entry per plugin with devices (the registry lists devices, so a plugin appears once
  // per device: keep the first).
  for (const Device& d : devices.devices()) {
    if (d.is_host()) continue;
    bool seen = std::any_of(plugins_.begin(), plugins_.end(),
                            [&](const Plugin& p) { return p.ctx == d.plugin_ctx; });
    if (seen) continue;
    bool slots =
        HMC_DEVICE_SLOT(d.plugin, host_register) && HMC_DEVICE_SLOT(d.plugin, host_unregister);
    if (!slots)
      HMC_LOG_I(
          "staging buffers are not pinned for device plugin {}: it has no host_register "
          "slot; its copies through them are pageable (slower)",
          d.plugin_name);
    plugins_.push_back({d.plugin, d.plugin_ctx, slots});
  }
}

StagePool::~StagePool() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_use_ != 0) HMC_LOG_W("staging pool destroyed with {} buffer(s) still handed out", in_use_);
  for (Slab& s : slabs_) {
    for (size_t i : s.registered_with) {
      hmc_plugin_status_t st = plugins_[i].table->host_unregister(plugins_[i].ctx, s.base);
      if (st != HMC_PLUGIN_SUCCESS)
        HMC_LOG_W("device plugin {}: host_unregister of a {}-byte staging slab: {}",
                  plugins_[i].table->name, s.bytes, plugin_status_string(st));
    }
    munmap(s.base, s.bytes);
    if (s.fd >= 0) close(s.fd);
  }
}

bool StagePool::map_slab_locked() {
  size_t count = std::min(buffers_per_slab_, max_buffers_ - mapped_buffers_);
  size_t bytes = count * stride_;
  // A memfd, so that a peer process on this host can read pieces straight out of the buffers
  // (framed/shared_bounces.cpp); anonymous memory where memfds are not available.
  int fd = memfd_create("hmc-stage", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    fd = -1;
  }
  void* p = fd >= 0
                ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    HMC_LOG_W("staging pool: mmap of a {}-byte slab failed: {}", bytes, strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  Slab slab{static_cast<char*>(p), bytes, fd, {}};
  for (size_t i = 0; i < plugins_.size(); ++i) {
    Plugin& pl = plugins_[i];
    if (!pl.can_register) continue;
    hmc_plugin_status_t st = pl.table->host_register(pl.ctx, p, bytes);
    if (st == HMC_PLUGIN_SUCCESS) {
      slab.registered_with.push_back(i);
      continue;
    }
    // Said once: the plugin is not asked again for later slabs.
    pl.can_register = false;
    HMC_LOG_I(
        "staging buffers are not pinned for device plugin {}: host_register of {} bytes: "
        "{}; its copies through them are pageable (slower)",
        pl.table->name, bytes, plugin_status_string(st));
  }
  slabs_.push_back(std::move(slab));
  // Handed out from the lowest address, which keeps a lightly used pool on few pages.
  for (size_t i = count; i-- > 0;) free_.push_back(static_cast<char*>(p) + i * stride_);
  mapped_buffers_ += count;
  return true;
}

void* StagePool::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) {
    if (mapped_buffers_ >= max_buffers_ || !map_slab_locked()) return nullptr;
  }
  void* buf = free_.back();
  free_.pop_back();
  buffers_[reinterpret_cast<uintptr_t>(buf)] = true;
  ++in_use_;
  return buf;
}

void StagePool::give(void* buf) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = buffers_.find(reinterpret_cast<uintptr_t>(buf));
  if (it == buffers_.end() || !it->second) {
    HMC_LOG_E("staging pool: give({}) of a buffer that is not handed out ({}); ignored", buf,
              it == buffers_.end() ? "not from this pool" : "given back twice");
    return;
  }
  it->second = false;
  --in_use_;
  free_.push_back(buf);
}

size_t StagePool::in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_ * chunk_;
}

size_t StagePool::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const Slab& s : slabs_) total += s.bytes;
  return total;
}

bool StagePool::shared_ref(const void* buf, SharedRef* out) const {
  auto addr = reinterpret_cast<uintptr_t>(buf);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Slab& s : slabs_) {
    auto base = reinterpret_cast<uintptr_t>(s.base);
    if (addr < base || addr >= base + s.bytes) continue;
    if (s.fd < 0) return false;
    out->fd = s.fd;
    out->slab_bytes = s.bytes;
    out->offset = addr - base;
    return true;
  }
  return false;
}

bool StagePool::shareable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !slabs_.empty() && slabs_.back().fd >= 0;
}

std::string StagePool::pinned_by() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const Plugin& p : plugins_)
    if (p.can_register) out += (out.empty() ? "" : ", ") + std::string(p.table->name);
  return out;
}

}  // namespace hmc

// The staging pool: pinned host bounce buffers of one size (the chunk), shared by everything in a
// context that moves device memory through host memory (cross-vendor copies, and the staging
// pipeline of peers whose transport only reaches host memory). One pool per context, never one
// per connection: 64 idle peers cost nothing here.
//
// Memory comes lazily, in page-aligned mmap slabs of several chunks, up to pool_bytes in total,
// and each slab is registered (pinned) with every loaded device plugin that has devices and a
// host_register slot, so that a buffer is pinned for both vendors of a cross-vendor copy. A plugin
// that cannot register still works on the buffers (its copies are then pageable); this is said
// once per plugin at info level. Destruction unregisters and unmaps everything.
//
// Thread-safe. take() never waits for a buffer to come back: it answers nullptr when pool_bytes
// are all handed out, and the caller retries after some of its own work completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/plugin/device.h"

namespace hmc {

class DeviceRegistry;

class StagePool {
 public:
  // chunk: bytes of each buffer (> 0); pool_bytes: the most memory the pool maps, rounded down to
  // whole chunks and at least one chunk. The registry's plugins must all be added already (those
  // added later do not see the buffers as pinned). Maps nothing yet.
  StagePool(DeviceRegistry& devices, size_t chunk, size_t pool_bytes);
  ~StagePool();
  StagePool(const StagePool&) = delete;
  StagePool& operator=(const StagePool&) = delete;

  size_t chunk() const { return chunk_; }
  // The bound given at construction, in whole chunks.
  size_t capacity_bytes() const { return max_buffers_ * chunk_; }

  // A buffer of chunk() bytes (page aligned), or nullptr when every buffer the bound allows is
  // handed out, or when a new slab cannot be mapped (logged). Never blocks on other users.
  void* take();
  // Returns a buffer from take(). A pointer the pool did not hand out is refused with an error
  // log (and ignored).
  void give(void* buf);

  size_t in_use_bytes() const;
  // Bytes mapped so far (grows by slabs up to capacity_bytes()).
  size_t mapped_bytes() const;
  // Names of the plugins that pinned the slabs ("cuda, hip"); for hmc-info and the log.
  std::string pinned_by() const;

  // Where a buffer of this pool lies, for another process on this host: slabs are memfd
  // mappings that it can map through /proc/<this pid>/fd/<fd> (the same permission that
  // cross-memory attach needs). False when buf is not in a shareable slab.
  struct SharedRef {
    int fd = -1;
    uint64_t slab_bytes = 0;
    uint64_t offset = 0;  // of buf in the slab
  };
  bool shared_ref(const void* buf, SharedRef* out) const;
  // Whether the newest slab is shareable (memfds work here).
  bool shareable() const;

 private:
  struct Plugin {
    const hmc_device_plugin_v1_t* table;
    hmc_device_ctx_t* ctx;
    bool can_register;  // false after its first failure: later slabs do not try again
  };
  struct Slab {
    char* base;
    size_t bytes;                         // mapped length
    int fd;                               // its memfd; -1 for an anonymous slab
    std::vector<size_t> registered_with;  // indices into plugins_
  };
  bool map_slab_locked();

  const size_t chunk_;
  const size_t stride_;  // chunk rounded up to a page, so every buffer is page aligned
  const size_t max_buffers_;
  const size_t buffers_per_slab_;

  mutable std::mutex mutex_;
  std::vector<Plugin> plugins_;
  std::vector<Slab> slabs_;
  std::vector<void*> free_;
  std::map<uintptr_t, bool> buffers_;  // every buffer handed out at least once -> in use
  size_t in_use_ = 0;
  size_t mapped_buffers_ = 0;
};

}  // namespace hmc

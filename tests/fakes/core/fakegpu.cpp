// The emulation core of the fake vendor runtimes (see fakegpu.h).
#include "fakegpu.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace fakegpu {

const char* err_name(Err e) {
  switch (e) {
    case Err::Ok: return "ok";
    case Err::NotReady: return "not ready";
    case Err::InvalidValue: return "invalid value";
    case Err::OutOfMemory: return "out of memory";
    case Err::NoDevice: return "no device";
    case Err::InvalidDevice: return "invalid device";
    case Err::InvalidContext: return "invalid context";
    case Err::InvalidHandle: return "invalid handle";
    case Err::AlreadyRegistered: return "already registered";
    case Err::NotRegistered: return "not registered";
    case Err::NotSupported: return "not supported";
    case Err::DeviceLost: return "device lost";
    case Err::CopyFailed: return "copy failed";
    case Err::Timeout: return "timeout";
  }
  return "?";
}

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}
size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// One device allocation or IPC import: a memfd mapped PROT_NONE at the device address and
// read-write at the emulator's view. Unmapped when the last holder (the table, or a queued copy)
// lets go, so a free racing with a copy cannot pull the memory from under the worker.
// Identifies an allocation for the life of the process, as the real runtimes' IPC handles do: a
// new allocation that reuses an address (or a file descriptor number) gets a different handle.
uint64_t next_region_serial() {
  static std::atomic<uint64_t> serial{1};
  return serial.fetch_add(1, std::memory_order_relaxed);
}

struct Region {
  uint64_t serial = next_region_serial();
  uintptr_t base = 0;
  size_t size = 0;    // as requested (the bounds copies are checked against)
  size_t mapped = 0;  // page-rounded length of both mappings
  int dev = -1;
  int fd = -1;
  char* view = nullptr;
  bool imported = false;

  ~Region() {
    if (view != nullptr) munmap(view, mapped);
    if (base != 0) munmap(reinterpret_cast<void*>(base), mapped);
    if (fd >= 0) close(fd);
  }
};

// Maps fd twice (device address and view); false on failure (errno set).
bool map_region(Region& r) {
  void* dev = mmap(nullptr, r.mapped, PROT_NONE, MAP_SHARED, r.fd, 0);
  if (dev == MAP_FAILED) return false;
  r.base = reinterpret_cast<uintptr_t>(dev);
  void* view = mmap(nullptr, r.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
  if (view == MAP_FAILED) return false;
  r.view = static_cast<char*>(view);
  return true;
}

struct HostRange {
  uintptr_t base = 0;
  size_t size = 0;
  bool pinned = false;  // from host_alloc (the emulator owns the mapping)
};

// IPC handle layout for the 64-byte handles (CUDA, HIP, MUSA).
struct IpcWire {
  char magic[8];
  uint32_t pid;
  int32_t fd;
  uint64_t size;
  int32_t dev;
  char vendor[8];
  uint64_t serial;  // Region::serial of the exporter
};
static_assert(sizeof(IpcWire) <= 64, "IPC wire fits in a 64-byte handle");
constexpr char kIpcMagic[8] = {'F', 'A', 'K', 'E', 'I', 'P', 'C', 0};

}  // namespace

struct EventState {
  std::mutex m;
  std::condition_variable cv;
  uint64_t generation = 0;  // of the latest record
  bool pending = false;
  Err result = Err::Ok;
};

class Event {
 public:
  int dev = 0;
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

struct Op {
  enum class Kind { Copy, Record, Host, Stop } kind = Kind::Stop;
  std::function<Err()> host;  // Kind::Host
  char* dst = nullptr;
  const char* src = nullptr;
  size_t size = 0;
  bool fail = false;
  bool d2d = false;  // both sides device memory
  std::shared_ptr<Region> hold_dst, hold_src;
  std::shared_ptr<EventState> event;
  uint64_t generation = 0;
  std::chrono::steady_clock::time_point queued;  // when the caller issued it
};

class Stream {
 public:
  int dev = 0;
  std::mutex m;
  std::condition_variable cv;
  std::deque<Op> queue;
  bool busy = false;
  Err pending_error = Err::Ok;  // of a failed copy, handed to the next event recorded
  // The emulated copy engine's timeline: when its last copy ends. A copy that was queued behind
  // it starts there, not when the worker thread happens to wake up (a timed sleep overshoots by
  // tens of microseconds on a busy machine, which a real engine running back-to-back does not).
  std::chrono::steady_clock::time_point busy_until{};
  std::thread worker;
};

class EmulatorImpl {
 public:
  explicit EmulatorImpl(const char* vendor) : vendor_(vendor) {
    for (char c : vendor_) upper_ += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    load_config();
  }

  long setting(const char* name, long def) const {
    std::string specific = "FAKEGPU_" + upper_ + "_" + name,
                generic = std::string("FAKEGPU_") + name;
    const char* v = std::getenv(specific.c_str());
    if (v == nullptr) v = std::getenv(generic.c_str());
    if (v == nullptr || *v == '\0') return def;
    return std::strtol(v, nullptr, 0);
  }

  void load_config() {
    Config c;
    c.devices = static_cast<int>(std::max(0L, setting("DEVICES", 2)));
    c.mem_bytes = static_cast<uint64_t>(std::max(1L, setting("MEM_MB", 1024))) << 20;
    c.bandwidth_MBps = static_cast<uint64_t>(std::max(0L, setting("BANDWIDTH_MBPS", 0)));
    c.d2d_bandwidth_MBps = static_cast<uint64_t>(
        std::max(0L, setting("D2D_BANDWIDTH_MBPS", static_cast<long>(c.bandwidth_MBps))));
    c.fail_alloc_nth = setting("FAIL_ALLOC_NTH", 0);
    c.fail_copy_nth = setting("FAIL_COPY_NTH", 0);
    c.lose_device_after = setting("LOSE_DEVICE_AFTER", 0);
    c.fail_ipc_open = setting("FAIL_IPC_OPEN", 0) != 0;
    std::lock_guard<std::mutex> lock(mutex_);
    config_ = c;
    // Allocations made before a reset keep their accounting.
    used_.resize(std::max(used_.size(), static_cast<size_t>(c.devices)), 0);
    defaults_.resize(std::max(defaults_.size(), static_cast<size_t>(c.devices)), nullptr);
    ops_ = allocs_ = copies_ = 0;
    lost_ = false;
  }

  Config config() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return config_;
  }

  // Counts one device operation; DeviceLost once the devices are gone.
  Err operation() {
    if (lost_) return Err::DeviceLost;
    long limit = config().lose_device_after;
    if (limit > 0 && ++ops_ > limit) {
      mark_lost();
      return Err::DeviceLost;
    }
    return Err::Ok;
  }

  void mark_lost() {
    lost_ = true;
    std::lock_guard<std::mutex> lock(mutex_);
    for (Stream* s : streams_) {
      std::lock_guard<std::mutex> sl(s->m);
      s->cv.notify_all();
    }
  }

  Err check_device(int dev) {
    if (lost_) return Err::DeviceLost;
    return dev >= 0 && dev < config().devices ? Err::Ok : Err::InvalidDevice;
  }

  // ---- memory ------------------------------------------------------------------------------

  Err alloc(int dev, size_t size, void** ptr) {
    if (Err e = check_device(dev); e != Err::Ok) return e;
    if (Err e = operation(); e != Err::Ok) return e;
    if (size == 0 || ptr == nullptr) return Err::InvalidValue;
    long n = ++allocs_;
    Config c = config();
    if (c.fail_alloc_nth > 0 && n == c.fail_alloc_nth) return Err::OutOfMemory;
    auto r = std::make_shared<Region>();
    r->size = size;
    r->mapped = round_up(size, page_size());
    r->dev = dev;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (used_[static_cast<size_t>(dev)] + r->mapped > c.mem_bytes) return Err::OutOfMemory;
      used_[static_cast<size_t>(dev)] += r->mapped;
    }
    std::string name = "fakegpu-" + vendor_ + "-dev" + std::to_string(dev);
    r->fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (r->fd < 0 || ftruncate(r->fd, static_cast<off_t>(r->mapped)) != 0 || !map_region(*r)) {
      std::lock_guard<std::mutex> lock(mutex_);
      used_[static_cast<size_t>(dev)] -= r->mapped;
      return Err::OutOfMemory;
    }
    return publish(r, ptr);
  }

  Err free(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == regions_.end() || it->second->imported) return Err::InvalidValue;
    uint64_t& used = used_[static_cast<size_t>(it->second->dev)];
    used = used >= it->second->mapped ? used - it->second->mapped : 0;
    regions_.erase(it);  // unmapped when queued copies let go too
    return Err::Ok;
  }

  Err host_alloc(size_t size, void** ptr) {
    if (Err e = operation(); e != Err::Ok) return e;
    if (size == 0 || ptr == nullptr) return Err::InvalidValue;
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Err::OutOfMemory;
    std::lock_guard<std::mutex> lock(mutex_);
    hosts_[reinterpret_cast<uintptr_t>(p)] = {reinterpret_cast<uintptr_t>(p), size, true};
    *ptr = p;
    return Err::Ok;
  }

  Err host_free(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = hosts_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == hosts_.end() || !it->second.pinned) return Err::InvalidValue;
    munmap(ptr, it->second.size);
    hosts_.erase(it);
    return Err::Ok;
  }

  Err host_register(void* ptr, size_t size) {
    if (Err e = operation(); e != Err::Ok) return e;
    if (ptr == nullptr || size == 0) return Err::InvalidValue;
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto next = hosts_.lower_bound(p);
    if (next != hosts_.end() && next->first < p + size) return Err::AlreadyRegistered;
    if (next != hosts_.begin() && std::prev(next)->second.base + std::prev(next)->second.size > p)
      return Err::AlreadyRegistered;
    hosts_[p] = {p, size, false};
    return Err::Ok;
  }

  Err host_unregister(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = hosts_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == hosts_.end() || it->second.pinned) return Err::NotRegistered;
    hosts_.erase(it);
    return Err::Ok;
  }

  std::shared_ptr<Region> region_of(const void* ptr) const {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = regions_.upper_bound(p);
    if (it == regions_.begin()) return nullptr;
    --it;
    if (p >= it->first + it->second->mapped) return nullptr;
    return it->second;
  }

  Err query(const void* ptr, PtrInfo* out) {
    PtrInfo info;
    if (auto r = region_of(ptr)) {
      info.type = MemType::Device;
      info.device = r->dev;
      info.base = r->base;
      info.size = r->size;
    } else {
      auto p = reinterpret_cast<uintptr_t>(ptr);
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = hosts_.upper_bound(p);
      if (it != hosts_.begin() && p < std::prev(it)->second.base + std::prev(it)->second.size) {
        info.type = MemType::Host;
        info.base = std::prev(it)->second.base;
        info.size = std::prev(it)->second.size;
      }
    }
    *out = info;
    return Err::Ok;
  }

  Err mem_info(int dev, size_t* free_bytes, size_t* total_bytes) {
    if (Err e = check_device(dev); e != Err::Ok) return e;
    std::lock_guard<std::mutex> lock(mutex_);
    *total_bytes = config_.mem_bytes;
    *free_bytes = config_.mem_bytes - used_[static_cast<size_t>(dev)];
    return Err::Ok;
  }

  // ---- copies --------------------------------------------------------------------------------

  // Resolves [p, p+size) to where the emulator reads or writes it. Device memory must lie within
  // one allocation; anything else is taken as host memory.
  Err resolve(const void* p, size_t size, bool* is_device, std::shared_ptr<Region>* hold,
              char** at) {
    std::shared_ptr<Region> r = region_of(p);
    if (r == nullptr) {
      *is_device = false;
      *at = static_cast<char*>(const_cast<void*>(p));
      return Err::Ok;
    }
    uintptr_t off = reinterpret_cast<uintptr_t>(p) - r->base;
    if (size > r->size || off > r->size - size) return Err::InvalidValue;
    *is_device = true;
    *at = r->view + off;
    *hold = std::move(r);
    return Err::Ok;
  }

  Err prepare_copy(void* dst, const void* src, size_t size, Dir dir, Op* op) {
    bool dst_dev = false, src_dev = false;
    if (dst == nullptr || src == nullptr) return Err::InvalidValue;
    if (Err e = resolve(dst, size, &dst_dev, &op->hold_dst, &op->dst); e != Err::Ok) return e;
    char* s = nullptr;
    if (Err e = resolve(src, size, &src_dev, &op->hold_src, &s); e != Err::Ok) return e;
    op->src = s;
    bool ok = true;
    switch (dir) {
      case Dir::HostToDevice: ok = dst_dev && !src_dev; break;
      case Dir::DeviceToHost: ok = !dst_dev && src_dev; break;
      case Dir::DeviceToDevice: ok = dst_dev && src_dev; break;
      case Dir::HostToHost: ok = !dst_dev && !src_dev; break;
      case Dir::Default: break;
    }
    if (!ok) return Err::InvalidValue;
    op->kind = Op::Kind::Copy;
    op->size = size;
    op->d2d = dst_dev && src_dev;
    long n = ++copies_;
    long nth = config().fail_copy_nth;
    op->fail = nth > 0 && n == nth;
    return Err::Ok;
  }

  Err copy_async(int dev, Stream* s, void* dst, const void* src, size_t size, Dir dir) {
    if (s == nullptr) s = default_stream(dev);
    if (s == nullptr) return Err::InvalidDevice;
    if (Err e = check_device(s->dev); e != Err::Ok) return e;
    if (Err e = operation(); e != Err::Ok) return e;
    if (size == 0) return Err::Ok;
    Op op;
    if (Err e = prepare_copy(dst, src, size, dir, &op); e != Err::Ok) return e;
    enqueue(s, std::move(op));
    return Err::Ok;
  }

  Err copy_sync(int dev, void* dst, const void* src, size_t size, Dir dir) {
    Stream* s = default_stream(dev);
    if (s == nullptr) return Err::InvalidDevice;
    if (Err e = copy_async(dev, s, dst, src, size, dir); e != Err::Ok) return e;
    Event ev;
    ev.dev = s->dev;
    if (Err e = event_record(&ev, s); e != Err::Ok) return e;
    return event_sync(&ev);
  }

  // ---- streams and events --------------------------------------------------------------------

  Stream* start_stream(int dev) {
    auto* s = new Stream;
    s->dev = dev;
    s->worker = std::thread([this, s] { run(s); });
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.insert(s);
    return s;
  }

  Err stream_create(int dev, Stream** out) {
    if (Err e = check_device(dev); e != Err::Ok) return e;
    if (Err e = operation(); e != Err::Ok) return e;
    *out = start_stream(dev);
    return Err::Ok;
  }

  Stream* default_stream(int dev) {
    if (dev < 0 || dev >= config().devices) return nullptr;
    std::unique_lock<std::mutex> lock(mutex_);
    if (defaults_[static_cast<size_t>(dev)] == nullptr) {
      lock.unlock();
      Stream* s = start_stream(dev);
      lock.lock();
      if (defaults_[static_cast<size_t>(dev)] == nullptr) defaults_[static_cast<size_t>(dev)] = s;
    }
    return defaults_[static_cast<size_t>(dev)];
  }

  // Work queued before destruction still runs; the call returns when it has.
  Err stream_destroy(Stream* s) {
    if (s == nullptr) return Err::InvalidHandle;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (streams_.erase(s) == 0) return Err::InvalidHandle;
    }
    Op stop;
    stop.kind = Op::Kind::Stop;
    enqueue(s, std::move(stop));
    s->worker.join();
    delete s;
    return Err::Ok;
  }

  Err stream_query(Stream* s) {
    std::lock_guard<std::mutex> lock(s->m);
    if (lost_) return Err::DeviceLost;
    return s->queue.empty() && !s->busy ? Err::Ok : Err::NotReady;
  }

  Err stream_sync(Stream* s) {
    std::unique_lock<std::mutex> lock(s->m);
    if (!s->cv.wait_for(lock, std::chrono::seconds(60),
                        [&] { return s->queue.empty() && !s->busy; }))
      return Err::Timeout;
    return lost_ ? Err::DeviceLost : Err::Ok;
  }

  Err event_record(Event* e, Stream* s) {
    if (e == nullptr) return Err::InvalidHandle;
    if (s == nullptr) s = default_stream(e->dev);
    if (s == nullptr || s->dev != e->dev) return Err::InvalidHandle;
    if (Err err = operation(); err != Err::Ok) return err;
    Op op;
    op.kind = Op::Kind::Record;
    op.event = e->state;
    {
      std::lock_guard<std::mutex> lock(e->state->m);
      op.generation = ++e->state->generation;
      e->state->pending = true;
    }
    enqueue(s, std::move(op));
    return Err::Ok;
  }

  Err event_query(Event* e) {
    std::lock_guard<std::mutex> lock(e->state->m);
    if (e->state->pending) return Err::NotReady;
    return e->state->result;
  }

  Err event_sync(Event* e) {
    std::unique_lock<std::mutex> lock(e->state->m);
    if (!e->state->cv.wait_for(lock, std::chrono::seconds(60), [&] { return !e->state->pending; }))
      return Err::Timeout;
    return e->state->result;
  }

  void enqueue(Stream* s, Op op) {
    op.queued = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(s->m);
    s->queue.push_back(std::move(op));
    s->cv.notify_all();
  }

  // The stream's worker: runs its operations in order.
  void run(Stream* s) {
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(s->m);
        s->cv.wait(lock, [&] { return !s->queue.empty(); });
        op = std::move(s->queue.front());
        s->queue.pop_front();
        s->busy = true;
      }
      if (op.kind == Op::Kind::Stop) return;
      if (op.kind == Op::Kind::Copy || op.kind == Op::Kind::Host) {
        Err e = op.kind == Op::Kind::Copy ? execute_copy(s, op)
                : lost_                   ? Err::DeviceLost
                                          : op.host();
        std::lock_guard<std::mutex> lock(s->m);
        if (e != Err::Ok && s->pending_error == Err::Ok) s->pending_error = e;
      } else {
        Err e;
        {
          std::lock_guard<std::mutex> lock(s->m);
          e = lost_ ? Err::DeviceLost : s->pending_error;
          s->pending_error = Err::Ok;
        }
        std::lock_guard<std::mutex> lock(op.event->m);
        if (op.event->generation == op.generation) {
          op.event->pending = false;
          op.event->result = e;
        }
        op.event->cv.notify_all();
      }
      op = Op();  // let go of the regions before reporting idle
      std::lock_guard<std::mutex> lock(s->m);
      s->busy = false;
      s->cv.notify_all();
    }
  }

  Err execute_copy(Stream* s, const Op& op) {
    if (lost_) return Err::DeviceLost;
    if (op.fail) return Err::CopyFailed;
    uint64_t bw = op.d2d ? config().d2d_bandwidth_MBps : config().bandwidth_MBps;
    // size bytes at bw MB/s take size / bw microseconds in all, the memmove included, so that
    // the configured figure is the copy's real bandwidth (unless memmove alone is slower). The
    // copy starts when it was issued or, if the engine was still busy then, where the previous
    // copy's time ended: copies queued back to back run back to back, however late this worker
    // thread woke up.
    auto start = std::max(op.queued, s->busy_until);
    auto end =
        start + std::chrono::nanoseconds(bw > 0 ? static_cast<int64_t>(op.size * 1000 / bw) : 0);
    s->busy_until = end;
    std::memmove(op.dst, op.src, op.size);
    if (bw > 0) {
      std::unique_lock<std::mutex> lock(s->m);  // a lost device interrupts the wait
      s->cv.wait_until(lock, end, [&] { return lost_.load(); });
      if (lost_) return Err::DeviceLost;
    }
    return Err::Ok;
  }

  Err launch_host(int dev, Stream* s, std::function<Err()> fn) {
    if (s == nullptr) s = default_stream(dev);
    if (s == nullptr) return Err::InvalidDevice;
    if (Err e = check_device(s->dev); e != Err::Ok) return e;
    if (Err e = operation(); e != Err::Ok) return e;
    Op op;
    op.kind = Op::Kind::Host;
    op.host = std::move(fn);
    enqueue(s, std::move(op));
    return Err::Ok;
  }

  Err device_view(const void* ptr, size_t size, std::shared_ptr<void>* hold, char** at) {
    bool is_device = false;
    std::shared_ptr<Region> r;
    if (Err e = resolve(ptr, size, &is_device, &r, at); e != Err::Ok) return e;
    if (!is_device) return Err::InvalidValue;
    *hold = std::move(r);
    return Err::Ok;
  }

  // ---- IPC and dma-buf -----------------------------------------------------------------------

  Err ipc_get(const void* ptr, void* handle, size_t handle_len) {
    if (Err e = operation(); e != Err::Ok) return e;
    std::shared_ptr<Region> r = region_of(ptr);
    if (r == nullptr || r->imported || handle == nullptr) return Err::InvalidValue;
    std::memset(handle, 0, handle_len);
    if (handle_len == 8) {  // CNRT: pid and fd only; the importer learns the size from the fd
      uint32_t pid = static_cast<uint32_t>(getpid());
      int32_t fd = r->fd;
      std::memcpy(handle, &pid, 4);
      std::memcpy(static_cast<char*>(handle) + 4, &fd, 4);
      return Err::Ok;
    }
    if (handle_len < sizeof(IpcWire)) return Err::InvalidValue;
    IpcWire w{};
    std::memcpy(w.magic, kIpcMagic, sizeof w.magic);
    w.pid = static_cast<uint32_t>(getpid());
    w.fd = r->fd;
    w.size = r->mapped;
    w.dev = r->dev;
    w.serial = r->serial;
    std::strncpy(w.vendor, vendor_.c_str(), sizeof w.vendor - 1);
    std::memcpy(handle, &w, sizeof w);
    return Err::Ok;
  }

  Err ipc_open(int dev, const void* handle, size_t handle_len, void** ptr) {
    if (Err e = check_device(dev); e != Err::Ok) return e;
    if (Err e = operation(); e != Err::Ok) return e;
    uint32_t pid = 0;
    int32_t fd = -1;
    if (handle_len == 8) {
      std::memcpy(&pid, handle, 4);
      std::memcpy(&fd, static_cast<const char*>(handle) + 4, 4);
    } else {
      IpcWire w;
      std::memcpy(&w, handle, sizeof w);
      if (std::memcmp(w.magic, kIpcMagic, sizeof w.magic) != 0 ||
          std::strncmp(w.vendor, vendor_.c_str(), sizeof w.vendor) != 0)
        return Err::InvalidValue;
      pid = w.pid;
      fd = w.fd;
    }
    // Like the real runtimes, a process cannot open its own handles.
    if (pid == static_cast<uint32_t>(getpid())) return Err::InvalidContext;
    // As in a container that does not share the exporter's IPC namespace.
    if (config().fail_ipc_open) return Err::InvalidHandle;
    std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    auto r = std::make_shared<Region>();
    r->fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (r->fd < 0) return Err::InvalidHandle;  // the exporter is gone, or freed the memory
    struct stat st {};
    if (fstat(r->fd, &st) != 0 || st.st_size <= 0) return Err::InvalidHandle;
    r->mapped = static_cast<size_t>(st.st_size);
    r->size = r->mapped;
    r->dev = dev;
    r->imported = true;
    if (!map_region(*r)) return Err::OutOfMemory;
    return publish(r, ptr);
  }

  Err ipc_close(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == regions_.end() || !it->second->imported) return Err::InvalidValue;
    regions_.erase(it);
    return Err::Ok;
  }

  Err dmabuf_export(const void* ptr, size_t size, int* fd) {
    if (Err e = operation(); e != Err::Ok) return e;
    std::shared_ptr<Region> r = region_of(ptr);
    auto p = reinterpret_cast<uintptr_t>(ptr);
    if (r == nullptr || r->imported || fd == nullptr) return Err::InvalidValue;
    if (p % page_size() != 0 || size % page_size() != 0 || size == 0) return Err::InvalidValue;
    if (p != r->base || size > r->mapped) return Err::InvalidValue;
    int out = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
    if (out < 0) return Err::OutOfMemory;
    *fd = out;
    return Err::Ok;
  }

  const std::string& vendor() const { return vendor_; }
  const std::string& upper() const { return upper_; }
  bool lost() const { return lost_; }

 private:
  // Makes the mapped region r findable by its base, which *ptr receives.
  Err publish(const std::shared_ptr<Region>& r, void** ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[r->base] = r;
    *ptr = reinterpret_cast<void*>(r->base);
    return Err::Ok;
  }

  const std::string vendor_;
  std::string upper_;
  mutable std::mutex mutex_;  // guards everything below but the atomics
  Config config_;
  std::vector<uint64_t> used_;  // bytes allocated per device
  std::map<uintptr_t, std::shared_ptr<Region>> regions_;
  std::map<uintptr_t, HostRange> hosts_;
  std::set<Stream*> streams_;
  std::vector<Stream*> defaults_;
  std::atomic<long> ops_{0}, allocs_{0}, copies_{0};
  std::atomic<bool> lost_{false};
};

// ---- Emulator: the exported face -----------------------------------------------------------

namespace {
std::mutex g_registry_mutex;
std::map<std::string, Emulator*>& registry() {
  static auto* r = new std::map<std::string, Emulator*>;
  return *r;
}
}  // namespace

Emulator::Emulator(const char* vendor) : impl_(new EmulatorImpl(vendor)) {}

Emulator& Emulator::get(const char* vendor) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  Emulator*& e = registry()[vendor];
  if (e == nullptr) e = new Emulator(vendor);
  return *e;
}

long Emulator::setting(const char* name, long def) const {
  return impl_->setting(name, def);
}
Config Emulator::config() const {
  return impl_->config();
}
int Emulator::device_count() const {
  return impl_->config().devices;
}
Err Emulator::check_device(int dev) {
  return impl_->check_device(dev);
}
bool Emulator::lost() const {
  return impl_->lost();
}

std::string Emulator::device_name(int dev) const {
  return "FakeGPU " + impl_->upper() + " " + std::to_string(dev);
}

void Emulator::device_uuid(int dev, unsigned char out[16]) const {
  std::memset(out, 0, 16);
  std::memcpy(out, "FAKE", 4);
  const std::string& v = impl_->vendor();
  for (size_t i = 0; i < 4 && i < v.size(); ++i) out[4 + i] = static_cast<unsigned char>(v[i]);
  out[15] = static_cast<unsigned char>(dev);
}

std::string Emulator::pci_bus_id(int dev) const {
  const std::string& v = impl_->vendor();
  int bus = v == "cuda" ? 0x1a : v == "hip" ? 0x2a : v == "mlu" ? 0x3a : 0x4a;
  char buf[16];
  std::snprintf(buf, sizeof buf, "0000:%02X:00.0", bus + dev);
  return buf;
}

Err Emulator::mem_info(int dev, size_t* f, size_t* t) {
  return impl_->mem_info(dev, f, t);
}
Err Emulator::alloc(int dev, size_t size, void** ptr) {
  return impl_->alloc(dev, size, ptr);
}
Err Emulator::free(const void* ptr) {
  return impl_->free(ptr);
}
Err Emulator::host_alloc(size_t size, void** ptr) {
  return impl_->host_alloc(size, ptr);
}
Err Emulator::host_free(void* ptr) {
  return impl_->host_free(ptr);
}
Err Emulator::host_register(void* ptr, size_t size) {
  return impl_->host_register(ptr, size);
}
Err Emulator::host_unregister(void* ptr) {
  return impl_->host_unregister(ptr);
}
Err Emulator::query(const void* ptr, PtrInfo* out) {
  return impl_->query(ptr, out);
}
Err Emulator::stream_create(int dev, Stream** out) {
  return impl_->stream_create(dev, out);
}
Err Emulator::stream_destroy(Stream* s) {
  return impl_->stream_destroy(s);
}
Err Emulator::stream_query(Stream* s) {
  return impl_->stream_query(s);
}
Err Emulator::stream_sync(Stream* s) {
  return impl_->stream_sync(s);
}
Err Emulator::copy_async(int dev, Stream* s, void* dst, const void* src, size_t size, Dir dir) {
  return impl_->copy_async(dev, s, dst, src, size, dir);
}
Err Emulator::copy_sync(int dev, void* dst, const void* src, size_t size, Dir dir) {
  return impl_->copy_sync(dev, dst, src, size, dir);
}
Err Emulator::event_create(int dev, Event** out) {
  if (Err e = impl_->check_device(dev); e != Err::Ok) return e;
  auto* ev = new Event;
  ev->dev = dev;
  *out = ev;
  return Err::Ok;
}
Err Emulator::event_destroy(Event* e) {
  if (e == nullptr) return Err::InvalidHandle;
  delete e;
  return Err::Ok;
}
Err Emulator::event_record(Event* e, Stream* s) {
  return impl_->event_record(e, s);
}
Err Emulator::event_query(Event* e) {
  return e == nullptr ? Err::InvalidHandle : impl_->event_query(e);
}
Err Emulator::event_sync(Event* e) {
  return e == nullptr ? Err::InvalidHandle : impl_->event_sync(e);
}
int Emulator::stream_device(const Stream* s) const {
  return s == nullptr ? -1 : s->dev;
}
Err Emulator::launch_host(int dev, Stream* s, std::function<Err()> fn) {
  return impl_->launch_host(dev, s, std::move(fn));
}
Err Emulator::device_view(const void* ptr, size_t size, std::shared_ptr<void>* hold, char** at) {
  return impl_->device_view(ptr, size, hold, at);
}
Err Emulator::ipc_get(const void* ptr, void* handle, size_t len) {
  return impl_->ipc_get(ptr, handle, len);
}
Err Emulator::ipc_open(int dev, const void* handle, size_t len, void** ptr) {
  return impl_->ipc_open(dev, handle, len, ptr);
}
Err Emulator::ipc_close(const void* ptr) {
  return impl_->ipc_close(ptr);
}
Err Emulator::dmabuf_export(const void* ptr, size_t size, int* fd) {
  return impl_->dmabuf_export(ptr, size, fd);
}
void Emulator::reset() {
  impl_->load_config();
}

}  // namespace fakegpu

extern "C" void fakegpu_reset(void) {
  std::lock_guard<std::mutex> lock(fakegpu::g_registry_mutex);
  for (auto& [name, e] : fakegpu::registry()) e->reset();
}

#include "path/calibrate.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "net/net_plugin.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/digest.h"
#include "util/log.h"
#include "util/status.h"

extern char** environ;

namespace hmc::path {

namespace {

// Bump when what is measured or how changes: older cache entries then no longer match.
// 2: the far end in a second context; 3: best of kPasses rounds.
constexpr int kMethodVersion = 3;
constexpr const char* kCacheHeader =
    "# hmc net calibration cache, format 1: key bandwidth_MBps latency_ns unix_time plugin/device";

constexpr size_t kSmall = 8;
constexpr size_t kLarge = 1u << 20;
constexpr int kWindow = 4;
constexpr int kPingPongs = 64;              // measured round trips, at most
constexpr int kMinPingPongs = 4;            // fewer than this within the budget: no latency figure
constexpr uint64_t kBulkBytes = 32u << 20;  // measured bytes, at most
constexpr uint64_t kTagLatency = 1, kTagLatencyBack = 2, kTagBulk = 3;

uint64_t median(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The loopback objects of one measurement. The far end lives in a second context of the same
// plugin when the plugin can make one (as the peer process would have its own): within one
// context some transports take a shortcut no two processes get (UCX's self transport copies
// in-process and reports a tenth of the real latency). Without a second context both ends
// share the device's context. The destructor closes the endpoints first (which releases any
// request still pending on them, so no plugin holds a pointer into the buffers), then the
// listener and the registrations.
class Loopback {
 public:
  Loopback(NetDevice& dev, hmc_net_ctx_t* far)
      : dev_(dev), net_(*dev.plugin), t_(net_.table()), far_(far) {}
  Loopback(const Loopback&) = delete;
  Loopback& operator=(const Loopback&) = delete;
  ~Loopback() {
    std::lock_guard<std::mutex> lock(net_.mutex());
    if (conn_) t_->close_ep(conn_);
    if (acc_) t_->close_ep(acc_);
    if (listener_) t_->close_listener(listener_);
    for (auto& m : mrs_) t_->dereg_mr(m.first, m.second);
  }

  // How the two ends are set up, for the log.
  const char* setup() const { return far_ ? "two contexts" : "one context"; }

  // Connects the device to itself (or to its twin in a second context) by the deadline.
  hmc_status_t connect(uint64_t deadline) {
    uint8_t handle[HMC_NET_HANDLE_MAX];
    size_t len = sizeof handle;
    hmc_plugin_status_t ps;
    {
      std::lock_guard<std::mutex> lock(net_.mutex());
      ps = t_->listen(far_ctx(), dev_.index, handle, &len, &listener_);
      if (ps == HMC_PLUGIN_SUCCESS && len <= sizeof handle)
        ps = t_->connect(net_.ctx(), dev_.index, handle, len, &conn_);
    }
    if (ps != HMC_PLUGIN_SUCCESS)
      return fail(from_plugin_status(ps), "listen/connect to itself failed: {}",
                  plugin_status_string(ps));
    if (len > sizeof handle) return fail(HMC_ERR_PLUGIN, "listen wrote a {}-byte handle", len);
    bool conn_ready = false, acc_ready = false;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(net_.mutex());
        progress_locked();
        if (!acc_) {
          ps = t_->accept(listener_, &acc_);
          if (ps != HMC_PLUGIN_SUCCESS && ps != HMC_PLUGIN_IN_PROGRESS)
            return fail(from_plugin_status(ps), "accept failed: {}", plugin_status_string(ps));
        }
        if (!conn_ready && (ps = t_->ep_ready(conn_)) != HMC_PLUGIN_IN_PROGRESS) {
          if (ps != HMC_PLUGIN_SUCCESS)
            return fail(from_plugin_status(ps), "connecting endpoint failed: {}",
                        plugin_status_string(ps));
          conn_ready = true;
        }
        if (acc_ && !acc_ready && (ps = t_->ep_ready(acc_)) != HMC_PLUGIN_IN_PROGRESS) {
          if (ps != HMC_PLUGIN_SUCCESS)
            return fail(from_plugin_status(ps), "accepted endpoint failed: {}",
                        plugin_status_string(ps));
          acc_ready = true;
        }
      }
      if (conn_ready && acc_ready) return HMC_SUCCESS;
      if (now_ns() >= deadline)
        return fail(HMC_ERR_TIMEOUT, "the connection to itself was not established in time");
    }
  }

  // Registers buf when the device needs registered buffers; *mr stays NULL otherwise. far: for
  // the accepting end (the second context's, when there is one).
  hmc_status_t register_buffer(void* buf, size_t len, bool far, hmc_net_mr_t** mr) {
    *mr = nullptr;
    if (!(dev_.props.flags & HMC_NET_FLAG_NEEDS_REG)) return HMC_SUCCESS;
    if (!HMC_NET_SLOT(t_, reg_mr))
      return fail(HMC_ERR_PLUGIN, "needs registered buffers but has no reg_mr");
    hmc_net_mem_desc_t d{};
    d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
    d.addr = buf;
    d.len = len;
    d.iface = HMC_MEM_IFACE_HOST;
    d.access = HMC_NET_ACCESS_LOCAL;
    d.dmabuf_fd = -1;
    d.device_ordinal = -1;
    uint8_t rkey[HMC_NET_RKEY_MAX];
    size_t rkey_len = sizeof rkey;
    std::lock_guard<std::mutex> lock(net_.mutex());
    hmc_net_ctx_t* ctx = far ? far_ctx() : net_.ctx();
    hmc_plugin_status_t ps = t_->reg_mr(ctx, dev_.index, &d, mr, rkey, &rkey_len);
    if (ps != HMC_PLUGIN_SUCCESS)
      return fail(from_plugin_status(ps), "registering {} bytes failed: {}", len,
                  plugin_status_string(ps));
    mrs_.push_back({ctx, *mr});
    return HMC_SUCCESS;
  }

  // Posts a receive on one end and a send on the other.
  hmc_status_t post(bool forward, void* rbuf, hmc_net_mr_t* rmr, const void* sbuf,
                    hmc_net_mr_t* smr, size_t len, uint64_t tag, hmc_net_request_t** rreq,
                    hmc_net_request_t** sreq) {
    hmc_net_ep_t* to = forward ? acc_ : conn_;
    hmc_net_ep_t* from = forward ? conn_ : acc_;
    std::lock_guard<std::mutex> lock(net_.mutex());
    hmc_plugin_status_t ps = t_->irecv(to, rbuf, len, rmr, tag, rreq);
    if (ps != HMC_PLUGIN_SUCCESS)
      return fail(from_plugin_status(ps), "irecv failed: {}", plugin_status_string(ps));
    ps = t_->isend(from, sbuf, len, smr, tag, sreq);
    if (ps != HMC_PLUGIN_SUCCESS)
      return fail(from_plugin_status(ps), "isend failed: {}", plugin_status_string(ps));
    return HMC_SUCCESS;
  }

  // Waits until every request in reqs ended (each entry is set to NULL as it does), by the
  // deadline. An ended request with an error fails the measurement.
  hmc_status_t wait_all(hmc_net_request_t** reqs, int n, uint64_t deadline) {
    for (;;) {
      int left = 0;
      {
        std::lock_guard<std::mutex> lock(net_.mutex());
        progress_locked();
        for (int i = 0; i < n; ++i) {
          if (!reqs[i]) continue;
          int done = 0;
          size_t bytes = 0;
          hmc_plugin_status_t ps = t_->test(reqs[i], &done, &bytes);
          if (!done) {
            if (ps != HMC_PLUGIN_SUCCESS)
              return fail(from_plugin_status(ps), "test failed: {}", plugin_status_string(ps));
            ++left;
            continue;
          }
          reqs[i] = nullptr;
          if (ps != HMC_PLUGIN_SUCCESS)
            return fail(from_plugin_status(ps), "a transfer ended with {}",
                        plugin_status_string(ps));
        }
      }
      if (left == 0) return HMC_SUCCESS;
      if (now_ns() >= deadline) return fail(HMC_ERR_TIMEOUT, "transfers did not end in time");
    }
  }

 private:
  void progress_locked() {
    if (!HMC_NET_SLOT(t_, progress)) return;
    t_->progress(net_.ctx());
    if (far_) t_->progress(far_);
  }
  hmc_net_ctx_t* far_ctx() const { return far_ ? far_ : net_.ctx(); }

  NetDevice& dev_;
  NetPlugin& net_;
  const hmc_net_plugin_v2_t* t_;
  hmc_net_ctx_t* far_;  // the second context (FarContexts owns it), or nullptr
  hmc_net_listener_t* listener_ = nullptr;
  hmc_net_ep_t* conn_ = nullptr;
  hmc_net_ep_t* acc_ = nullptr;
  std::vector<std::pair<hmc_net_ctx_t*, hmc_net_mr_t*>> mrs_;
};

hmc_status_t measure_locked_out(NetDevice& dev, int budget_ms, Measurement* out,
                                hmc_net_ctx_t* far) {
  uint64_t start = now_ns();
  uint64_t deadline = start + uint64_t(budget_ms) * 1000000;
  if (!(dev.props.flags & HMC_NET_FLAG_TAGGED) || !HMC_NET_SLOT(dev.plugin->table(), isend) ||
      !HMC_NET_SLOT(dev.plugin->table(), irecv))
    return fail(HMC_ERR_NOT_SUPPORTED, "it offers no tagged send/receive");
  // Buffers outlive the Loopback (declared first): its destructor releases every request.
  std::vector<uint8_t> small_a(kSmall, 0x5a), small_b(kSmall), large_a(kLarge, 0xa5),
      large_b(kLarge);
  Loopback lb(dev, far);
  hmc_status_t st = lb.connect(deadline);
  if (st != HMC_SUCCESS) return st;
  hmc_net_mr_t *mr_sa, *mr_sb, *mr_la, *mr_lb;
  // The a buffers are used by the connecting end only, the b buffers by the accepting end.
  if ((st = lb.register_buffer(small_a.data(), kSmall, false, &mr_sa)) != HMC_SUCCESS ||
      (st = lb.register_buffer(small_b.data(), kSmall, true, &mr_sb)) != HMC_SUCCESS ||
      (st = lb.register_buffer(large_a.data(), kLarge, false, &mr_la)) != HMC_SUCCESS ||
      (st = lb.register_buffer(large_b.data(), kLarge, true, &mr_lb)) != HMC_SUCCESS)
    return st;

  // Latency: ping-pongs, within a quarter of what is left (the rest is for bandwidth).
  uint64_t lat_end = now_ns() + (deadline - std::min(deadline, now_ns())) / 4;
  auto ping_pong = [&]() -> hmc_status_t {
    hmc_net_request_t* r[2] = {nullptr, nullptr};
    hmc_status_t s = lb.post(true, small_b.data(), mr_sb, small_a.data(), mr_sa, kSmall,
                             kTagLatency, &r[0], &r[1]);
    if (s == HMC_SUCCESS) s = lb.wait_all(r, 2, deadline);
    if (s == HMC_SUCCESS)
      s = lb.post(false, small_a.data(), mr_sa, small_b.data(), mr_sb, kSmall, kTagLatencyBack,
                  &r[0], &r[1]);
    if (s == HMC_SUCCESS) s = lb.wait_all(r, 2, deadline);
    return s;
  };
  for (int i = 0; i < 4; ++i)  // warm-up: first-message costs (lazy setup, page faults)
    if ((st = ping_pong()) != HMC_SUCCESS) return st;
  // Each round trip and each round is timed on its own and the median kept: a thread of this
  // process preempted now and then (a busy host) moves the mean, not the median.
  std::vector<uint64_t> trip_ns;
  while (static_cast<int>(trip_ns.size()) < kPingPongs &&
         (static_cast<int>(trip_ns.size()) < kMinPingPongs || now_ns() < lat_end)) {
    uint64_t t = now_ns();
    if ((st = ping_pong()) != HMC_SUCCESS) return st;
    trip_ns.push_back(now_ns() - t);
  }
  uint64_t lat_ns = median(trip_ns) / 2;

  // Bandwidth: rounds of kWindow large messages in flight; one unmeasured round first.
  auto round = [&]() -> hmc_status_t {
    hmc_net_request_t* r[2 * kWindow] = {};
    for (int i = 0; i < kWindow; ++i) {
      hmc_status_t s = lb.post(true, large_b.data(), mr_lb, large_a.data(), mr_la, kLarge, kTagBulk,
                               &r[2 * i], &r[2 * i + 1]);
      if (s != HMC_SUCCESS) return s;
    }
    return lb.wait_all(r, 2 * kWindow, deadline);
  };
  if ((st = round()) != HMC_SUCCESS) return st;
  std::vector<uint64_t> round_ns;
  uint64_t bytes = 0, t0 = now_ns();
  do {
    uint64_t t = now_ns();
    if ((st = round()) != HMC_SUCCESS) {
      // Out of time in a later round: the rounds already timed are the measurement.
      if (st != HMC_ERR_TIMEOUT || round_ns.empty()) return st;
      break;
    }
    round_ns.push_back(std::max<uint64_t>(now_ns() - t, 1));
    bytes += uint64_t(kWindow) * kLarge;
  } while (bytes < kBulkBytes && now_ns() < deadline);
  uint64_t elapsed_ns = now_ns() - t0;
  uint64_t round_bytes = uint64_t(kWindow) * kLarge;

  out->latency_ns = static_cast<uint32_t>(std::clamp<uint64_t>(lat_ns, 1, UINT32_MAX));
  // bytes per ns * 1000 = MB/s
  out->bandwidth_MBps = std::max<uint64_t>(round_bytes * 1000 / median(round_ns), 1);
  HMC_LOG_D(
      "calibration of {} ({}): {} round trips, {} MiB in {} rounds and {:.1f} ms, "
      "{:.1f} ms in all",
      dev.key(), lb.setup(), trip_ns.size(), bytes >> 20, round_ns.size(), elapsed_ns / 1e6,
      (now_ns() - start) / 1e6);
  return HMC_SUCCESS;
}

// Rounds over the devices in one calibration (see calibrate_capabilities).
constexpr int kPasses = 3;
// How long a process waits for another one's calibration before measuring anyway.
constexpr int kLockWaitMs = 2 * kTotalBudgetMs + 1000;

bool make_parent_dirs(const std::string& path);

// An exclusive flock(2) on <cache>.lock, held while this process measures, taken within
// kLockWaitMs (polled: every wait is bounded) or not at all. Nothing without a cache path.
class CacheLock {
 public:
  explicit CacheLock(const std::string& cache_path) {
    if (cache_path.empty() || !make_parent_dirs(cache_path)) return;
    std::string file = cache_path + ".lock";
    fd_ = open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      HMC_LOG_D("calibration cache lock {}: {}", file, strerror(errno));
      return;
    }
    uint64_t deadline = now_ns() + uint64_t(kLockWaitMs) * 1000000;
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if ((errno != EWOULDBLOCK && errno != EINTR) || now_ns() > deadline) {
        HMC_LOG_I("calibration: {} still held by another process after {} ms; measuring anyway",
                  file, kLockWaitMs);
        close(fd_);
        fd_ = -1;
        return;
      }
      usleep(2000);
    }
  }
  ~CacheLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

// Process-wide results: key -> measurement, or why it failed.
struct Memory {
  std::mutex mutex;  // held for a whole calibrate_capabilities call
  struct Entry {
    bool ok = false;
    Measurement m;
    std::string source;  // "measured" or "cached in <file>"
    std::string error;   // why it failed
  };
  std::map<std::string, Entry> results;
};
Memory& memory() {
  static Memory* m = new Memory();  // never destroyed: usable from atexit and other threads
  return *m;
}

bool file_identity(const std::string& file, std::string* out) {
  if (file.empty()) return false;
  char real[PATH_MAX];
  if (!realpath(file.c_str(), real)) return false;
  struct stat st;
  if (stat(real, &st) != 0) return false;
  *out = fmt::format("{}|{}|{}.{:09}|{}|{}", real, static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec),
                     static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_dev));
  return true;
}

bool make_parent_dirs(const std::string& path) {
  for (size_t pos = 1; (pos = path.find('/', pos)) != std::string::npos; ++pos) {
    std::string dir = path.substr(0, pos);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

struct CacheLine {
  std::string key;
  Measurement m;
  int64_t time = 0;
  std::string name;
};

// Reads the cache's entries; malformed lines are skipped.
std::vector<CacheLine> read_cache(const std::string& path) {
  std::vector<CacheLine> out;
  std::ifstream in(path);
  std::string line;
  size_t lines = 0;
  while (lines++ < 4 * kCacheMaxEntries && std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.size() > 1024) continue;
    std::istringstream is(line);
    CacheLine c;
    uint64_t bw = 0, lat = 0;
    if (!(is >> c.key >> bw >> lat >> c.time)) continue;
    if (c.key.size() != 64 || bw == 0 || lat == 0 || lat > UINT32_MAX) continue;
    is >> c.name;
    c.m.bandwidth_MBps = bw;
    c.m.latency_ns = static_cast<uint32_t>(lat);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

CalibrationSettings calibration_settings(const Config& config) {
  CalibrationSettings s;
  if (auto v = config.raw("HMC_NET_CALIBRATE")) {
    if (!parse_bool(*v, &s.enabled)) {
      HMC_LOG_W("HMC_NET_CALIBRATE={} is not a boolean (0/1, yes/no, on/off): calibration stays on",
                *v);
      s.enabled = true;
    }
  }
  auto cache = config.raw("HMC_NET_CALIBRATION_CACHE");
  if (cache && (*cache == "off" || *cache == "0" || *cache == "none")) {
    s.cache_path.clear();
  } else if (cache && !cache->empty()) {
    s.cache_path = *cache;
  } else {
    const char* xdg = getenv("XDG_CACHE_HOME");
    const char* home = getenv("HOME");
    if (xdg && xdg[0] == '/')
      s.cache_path = std::string(xdg) + "/hmc/net-calibration";
    else if (home && home[0] == '/')
      s.cache_path = std::string(home) + "/.cache/hmc/net-calibration";
  }
  return s;
}

FarContexts::~FarContexts() {
  for (auto& m : made_) {
    if (!m.second) continue;
    std::lock_guard<std::mutex> lock(m.first->mutex());
    m.first->table()->finalize(m.second);
  }
}

hmc_net_ctx_t* FarContexts::get(NetDevice& dev) {
  NetPlugin& net = *dev.plugin;
  hmc_net_ctx_t* c = nullptr;
  auto it =
      std::find_if(made_.begin(), made_.end(), [&](const auto& m) { return m.first == &net; });
  if (it != made_.end()) {
    c = it->second;
  } else {
    const hmc_net_plugin_v2_t* t = net.table();
    std::lock_guard<std::mutex> lock(net.mutex());
    if (!net.host_services() || t->init(net.host_services(), &c) != HMC_PLUGIN_SUCCESS) c = nullptr;
    made_.push_back({&net, c});
  }
  if (!c) return nullptr;
  // The same configuration gives the same device list; checked all the same.
  const hmc_net_plugin_v2_t* t = net.table();
  std::lock_guard<std::mutex> lock(net.mutex());
  int count = 0;
  hmc_net_device_props_t p{};
  p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
  if (t->device_count(c, &count) != HMC_PLUGIN_SUCCESS || dev.index >= count ||
      t->device_props(c, dev.index, &p) != HMC_PLUGIN_SUCCESS || !p.name || dev.name != p.name)
    return nullptr;
  return c;
}

hmc_status_t measure_device(NetDevice& dev, int budget_ms, Measurement* out, FarContexts* far) {
  FarContexts own;
  hmc_net_ctx_t* far_ctx = (far ? far : &own)->get(dev);
  Measurement m;
  hmc_status_t st = measure_locked_out(dev, budget_ms, &m, far_ctx);
  if (st != HMC_SUCCESS)
    return set_error(st, fmt::format("calibration of {}: {}", dev.key(), last_error()));
  *out = m;
  return HMC_SUCCESS;
}

bool CalibrationCache::lookup(const std::string& key, int64_t now, int64_t max_age_s,
                              Measurement* out) const {
  if (path_.empty()) return false;
  for (const auto& c : read_cache(path_)) {
    if (c.key != key) continue;
    if (c.time > now + 60 || now - c.time > max_age_s) return false;  // stale, or clock skewed
    *out = c.m;
    return true;
  }
  return false;
}

bool CalibrationCache::store(const std::string& key, const std::string& name, const Measurement& m,
                             int64_t now) {
  if (path_.empty()) return false;
  std::vector<CacheLine> lines = read_cache(path_);
  lines.erase(
      std::remove_if(lines.begin(), lines.end(), [&](const CacheLine& c) { return c.key == key; }),
      lines.end());
  lines.push_back({key, m, now, name});
  std::stable_sort(lines.begin(), lines.end(),
                   [](const CacheLine& a, const CacheLine& b) { return a.time > b.time; });
  if (lines.size() > kCacheMaxEntries) lines.resize(kCacheMaxEntries);
  std::string text = std::string(kCacheHeader) + "\n";
  for (const auto& c : lines)
    text += fmt::format("{} {} {} {} {}\n", c.key, c.m.bandwidth_MBps, c.m.latency_ns, c.time,
                        c.name.empty() ? "-" : c.name);
  if (!make_parent_dirs(path_)) {
    HMC_LOG_D("calibration cache {}: cannot create its directory: {}", path_, strerror(errno));
    return false;
  }
  std::string tmp = fmt::format("{}.tmp.{}", path_, getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    HMC_LOG_D("calibration cache {}: cannot write {}: {}", path_, tmp, strerror(errno));
    return false;
  }
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = close(fd) == 0 && ok;
  if (ok) ok = rename(tmp.c_str(), path_.c_str()) == 0;
  if (!ok) {
    HMC_LOG_D("calibration cache {}: write failed: {}", path_, strerror(errno));
    unlink(tmp.c_str());
  }
  return ok;
}

std::string calibration_key(const std::string& host_id, const std::string& plugin_file,
                            const std::string& plugin, const std::string& device,
                            const std::string& config_text) {
  std::string identity;
  if (!file_identity(plugin_file, &identity)) return "";
  std::string text = fmt::format("hmc-calibration {}\nhost {}\nfile {}\nplugin {}\ndevice {}\n{}",
                                 kMethodVersion, host_id, identity, plugin, device, config_text);
  Sha256Digest digest;
  sha256(text.data(), text.size(), &digest);
  return fmt::format("{:02x}", fmt::join(digest, ""));
}

std::string device_config_text(const Config& config, const std::string& plugin) {
  std::vector<std::string> items;
  for (const auto& v : config.declared())
    if (v.owner == plugin) items.push_back(v.name + "=" + config.get(v.name));
  items.push_back("HMC_LISTEN_HOST=" + config.get("HMC_LISTEN_HOST"));
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, "UCX_", 4) == 0 || strncmp(*e, "FI_", 3) == 0) items.push_back(*e);
  std::sort(items.begin(), items.end());
  std::string s;
  for (const auto& i : items) s += i + "\n";
  return s;
}

bool calibration_useful(const Capabilities& caps) {
  int tagged = 0;
  bool unknown = false;
  for (const auto& r : caps.net) {
    if (!(r.flags & HMC_NET_FLAG_TAGGED)) continue;
    ++tagged;
    if (r.bandwidth_MBps == 0 || r.latency_ns == 0) unknown = true;
  }
  return tagged >= 2 && unknown;
}

void calibrate_capabilities(const CalibrationSettings& settings,
                            const std::vector<CalibrationTarget>& targets, Capabilities* caps,
                            CalibrationMode mode, std::vector<CalibrationOutcome>* outcomes) {
  std::vector<CalibrationOutcome> local;
  std::vector<CalibrationOutcome>& out = outcomes ? *outcomes : local;
  out.clear();
  for (const auto& rec : caps->net) out.push_back({rec.key(), ""});
  if (mode == CalibrationMode::Measure && settings.enabled && !calibration_useful(*caps)) {
    // Nothing to rank: no measurement, and no cache read on every connect either.
    for (size_t i = 0; i < out.size(); ++i)
      out[i].state = caps->net[i].bandwidth_MBps && caps->net[i].latency_ns
                         ? "declared"
                         : "skipped: this side has nothing else to rank it against";
    return;
  }
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mutex);
  CalibrationCache cache(settings.cache_path);

  // Devices whose figures are not declared and not remembered by this process.
  struct Pending {
    size_t index;
    const CalibrationTarget* target;
    std::string key, memo_key;
    Memory::Entry e;
    bool measure = false;
  };
  std::vector<Pending> pending;
  auto apply = [&](size_t i, const Memory::Entry& e) {
    if (!e.ok) return;
    caps->net[i].measured_bandwidth_MBps = e.m.bandwidth_MBps;
    caps->net[i].measured_latency_ns = e.m.latency_ns;
  };
  for (size_t i = 0; i < caps->net.size(); ++i) {
    NetRecord& rec = caps->net[i];
    std::string& state = out[i].state;
    if (rec.bandwidth_MBps && rec.latency_ns) {
      state = "declared";
      continue;
    }
    if (!(rec.flags & HMC_NET_FLAG_TAGGED)) {
      state = "skipped: no send/receive to measure";
      continue;
    }
    if (!settings.enabled) {
      state = "off (HMC_NET_CALIBRATE=0)";
      continue;
    }
    const CalibrationTarget* t = nullptr;
    for (const auto& x : targets)
      if (x.device && x.device->key() == rec.key()) t = &x;
    if (!t) {
      state = "skipped: not a device of this context";
      continue;
    }
    std::string key =
        calibration_key(caps->host_id, t->plugin_file, rec.plugin, rec.device, t->config_text);
    // Without a key (the plugin file cannot be identified) nothing goes to the cache; the
    // process still remembers the result under the names and settings.
    std::string memo_key = key.empty() ? "unidentified " + rec.key() + "\n" + t->config_text : key;
    auto it = mem.results.find(memo_key);
    if (it != mem.results.end()) {
      state = it->second.ok ? it->second.source : "failed: " + it->second.error;
      apply(i, it->second);
      continue;
    }
    pending.push_back({i, t, key, memo_key, {}, false});
  }
  if (pending.empty()) return;

  // Processes starting together on one host measure one after another, the later ones reading
  // what the first stored: measuring at once, each would see a share of the CPU (and figures
  // that rank by luck).
  CacheLock file_lock(mode == CalibrationMode::LookupOnly ? std::string() : cache.path());
  int64_t now_s = static_cast<int64_t>(time(nullptr));
  std::vector<Pending*> to_measure;
  for (Pending& p : pending) {
    std::string& state = out[p.index].state;
    const std::string name = caps->net[p.index].key();
    if (!p.key.empty() && cache.lookup(p.key, now_s, kCacheMaxAgeS, &p.e.m)) {
      p.e.ok = true;
      p.e.source = state = "cached in " + cache.path();
      HMC_LOG_I("calibration of {}: {} MB/s, {:.2f} us (from {})", name, p.e.m.bandwidth_MBps,
                p.e.m.latency_ns / 1000.0, cache.path());
      mem.results[p.memo_key] = p.e;
      apply(p.index, p.e);
    } else if (mode == CalibrationMode::LookupOnly) {
      state = "not measured yet";
    } else {
      p.measure = true;
      to_measure.push_back(&p);
    }
  }
  if (to_measure.empty()) return;

  // kPasses rounds over the devices, each device measured once per round (a round that finds
  // the total budget spent is cut short); a device keeps its best bandwidth and its best
  // latency. This machine's speed
  // changes for a while at a time: a device measured in one slow spell would otherwise rank
  // below one measured just before it.
  FarContexts far;  // finalized at the end of this call
  uint64_t total_deadline = now_ns() + uint64_t(kTotalBudgetMs) * 1000000;
  for (Pending* p : to_measure) {
    uint64_t setup = now_ns();
    far.get(*p->target->device);  // setup: outside the time budget
    total_deadline += now_ns() - setup;
  }
  std::vector<int> done(to_measure.size(), 0);
  for (int pass = 0; pass < kPasses; ++pass) {
    for (size_t j = 0; j < to_measure.size(); ++j) {
      Pending& p = *to_measure[j];
      if (pass > 0 && done[j] == 0) continue;  // failed in the first pass: not again
      uint64_t now = now_ns();
      int left_ms = now >= total_deadline ? 0 : static_cast<int>((total_deadline - now) / 1000000);
      if (left_ms < 10) continue;
      Measurement m;
      hmc_status_t st =
          measure_device(*p.target->device, std::min(left_ms, kDeviceBudgetMs), &m, &far);
      if (st != HMC_SUCCESS) {
        if (done[j] == 0) p.e.error = last_error();
        continue;
      }
      p.e.m.bandwidth_MBps = std::max(p.e.m.bandwidth_MBps, m.bandwidth_MBps);
      p.e.m.latency_ns = done[j] == 0 ? m.latency_ns : std::min(p.e.m.latency_ns, m.latency_ns);
      ++done[j];
    }
  }
  for (size_t j = 0; j < to_measure.size(); ++j) {
    Pending& p = *to_measure[j];
    std::string& state = out[p.index].state;
    const std::string name = caps->net[p.index].key();
    if (done[j] == 0 && p.e.error.empty()) {
      state = fmt::format("skipped: the calibration time ({} ms) was spent", kTotalBudgetMs);
      HMC_LOG_I("calibration of {}: {}", name, state);
      continue;  // not remembered: the next connect may have time for it
    }
    p.e.ok = done[j] > 0;
    if (p.e.ok) {
      p.e.error.clear();
      p.e.source = state = "measured";
      HMC_LOG_I(
          "calibration of {}: {} MB/s, {:.2f} us one-way (best of {} measurements over "
          "loopback{})",
          name, p.e.m.bandwidth_MBps, p.e.m.latency_ns / 1000.0, done[j],
          p.key.empty() || cache.path().empty() ? "" : ", cached in " + cache.path());
      if (!p.key.empty()) cache.store(p.key, name, p.e.m, now_s);
    } else {
      state = "failed: " + p.e.error;
      HMC_LOG_I("{}; path choice uses default figures for it", p.e.error);
    }
    mem.results[p.memo_key] = p.e;
    apply(p.index, p.e);
  }
}

void reset_calibration_memory() {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mutex);
  mem.results.clear();
}

}  // namespace hmc::path

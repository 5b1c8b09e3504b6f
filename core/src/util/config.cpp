#include "util/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/log.h"
#include "util/status.h"

extern char** environ;

namespace hmc {

const std::vector<ConfigVar>& core_config_vars() {
  static const std::vector<ConfigVar> vars = {
      {"HMC_PLUGIN_PATH", ConfigType::String, "",
       "colon-separated directories or .so files searched for plugins before lib/hmc/ beside "
       "libhmc.so",
       "core"},
      {"HMC_DEVICE_PLUGINS", ConfigType::List, "",
       "comma-separated device plugin names in order of preference; ^name excludes; unset: all "
       "found",
       "core"},
      {"HMC_NET_PLUGINS", ConfigType::List, "",
       "comma-separated net plugin names in order of preference; ^name excludes; unset: all found",
       "core"},
      {"HMC_LIBRARY_SIGNALS", ConfigType::String, "restore",
       "restore: the signal dispositions a plugin's libraries change while they load, initialise "
       "or finalise (UCX's and PSM's error handlers) are put back as the application had them; "
       "keep: the libraries' handlers stay (UCX's backtraces on a crash)",
       "core"},
      {"HMC_CCL_PLUGINS", ConfigType::List, "",
       "comma-separated ccl plugin (vendor collective library) names in order of preference; ^name "
       "excludes; unset: all found",
       "core"},
      {"HMC_LOG_LEVEL", ConfigType::LogLevel, "warn", "error, warn, info, debug or trace", "core"},
      {"HMC_LOG_FILE", ConfigType::String, "stderr", "log destination; %p is replaced by the pid",
       "core"},
      {"HMC_TIMEOUT_MS", ConfigType::Int, "30000",
       "default timeout of blocking calls, and how long a silent peer is waited for before it is "
       "declared lost",
       "core"},
      {"HMC_AUTH_TOKEN", ConfigType::String, "",
       "shared secret; when set, peers must prove they know it (HMAC-SHA256 challenge) at hello",
       "core"},
      {"HMC_PROGRESS_THREAD", ConfigType::Bool, "1", "run a background progress thread per context",
       "core"},
      {"HMC_WAIT_SPIN_US", ConfigType::Int, "1000",
       "how long a thread waiting in hmc (a request, a notification, a collective) polls with "
       "nothing happening before it sleeps on the net plugins' wake-up fds, a millisecond at a "
       "time, so that an idle wait leaves the CPU to others; 0 to 60000000 (a value beyond the "
       "wait's timeout: never sleep)",
       "core"},
      {"HMC_LISTEN_HOST", ConfigType::String, "127.0.0.1",
       "address the control plane's TCP listener binds to (0.0.0.0 for all interfaces)", "core"},
      {"HMC_LISTEN_PORT", ConfigType::Int, "0", "control-plane TCP port; 0 picks a free one",
       "core"},
      {"HMC_PATH", ConfigType::String, "",
       "force the data path for every peer, as plugin/device (hoststage/tcp); fails when unusable",
       "core"},
      {"HMC_HEARTBEAT_MS", ConfigType::Int, "1000",
       "interval of control-plane heartbeats to idle peers; at most a quarter of HMC_TIMEOUT_MS (a "
       "smaller timeout shortens it)",
       "core"},
      {"HMC_HANDSHAKE_TIMEOUT_MS", ConfigType::Int, "5000",
       "how long an incoming connector may take from connecting to the end of its hello (and token "
       "challenge) before it is dropped; at most HMC_TIMEOUT_MS",
       "core"},
      {"HMC_MAX_PENDING_HANDSHAKES", ConfigType::Int, "128",
       "incoming connectors in setup at once, per context; beyond it the oldest still in its hello "
       "is dropped (1 to 65536)",
       "core"},
      {"HMC_NET_CALIBRATE", ConfigType::Bool, "1",
       "measure net devices that declare no bandwidth or latency, over loopback, at the first "
       "connect or accept (0: declared or default figures)",
       "core"},
      {"HMC_NET_CALIBRATION_CACHE", ConfigType::String, "",
       "file keeping calibration results (empty: $XDG_CACHE_HOME/hmc/net-calibration, else "
       "~/.cache/hmc/net-calibration; off: none)",
       "core"},
      {"HMC_STAGE_CHUNK", ConfigType::Size, "2M",
       "bytes per chunk when device memory moves through pinned host buffers (cross-vendor copies, "
       "staging over host-only transports); 4K to 1G",
       "core"},
      {"HMC_STAGE_DEPTH", ConfigType::Int, "4", "chunks in flight per staged transfer; 1 to 64",
       "core"},
      {"HMC_DEVICE_IPC", ConfigType::Bool, "1",
       "offer device IPC to peers in other processes on this host: messages of a chunk or more "
       "from device memory are copied device to device instead of staged (0: always staged)",
       "core"},
      {"HMC_DEVICE_IPC_CACHE", ConfigType::Int, "64",
       "per peer, how many of its device allocations stay mapped after a device IPC message, for "
       "the next ones, where the runtime's IPC handles are unique (hmc-info: ipc-unique-handles); "
       "0: map and unmap per message; 0 to 4096",
       "core"},
      {"HMC_NET_DMABUF", ConfigType::Bool, "1",
       "register device memory with net devices that take dma-bufs (hmc_mem_register; one-sided "
       "access then goes device-direct); 0: device memory is reached by staging only",
       "core"},
      {"HMC_NET_NOTIFY_CARRIED", ConfigType::Bool, "1",
       "a put's notification travels with its data where the path's net plugin offers it (RDMA "
       "write with immediate, a message after the data); 0: always on the control plane, after the "
       "put ended",
       "core"},
      {"HMC_STAGE_SHARED", ConfigType::Bool, "1",
       "between processes on one host, a receiver of staged device memory copies the pieces "
       "straight out of the sender's staging buffers (one copy out, one copy in); 0: through the "
       "transport",
       "core"},
      {"HMC_DEVICE_COPY_CALIBRATE", ConfigType::Bool, "1",
       "measure each device plugin's copy rates (device to host, host to device, device to device; "
       "a few milliseconds) at the first connect or accept, for choosing how device memory crosses "
       "to a peer; plugins that declare a copy bandwidth are not measured (0: declared or default "
       "figures)",
       "core"},
      {"HMC_STAGE_POOL_BYTES", ConfigType::Size, "64M",
       "most pinned host memory the context's staging buffers take, shared by all peers; at least "
       "one chunk",
       "core"},
      {"HMC_RANK", ConfigType::Int, "-1",
       "this process's rank for hmc_comm_create when its options give none; -1: the launcher's "
       "(RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)",
       "core"},
      {"HMC_WORLD_SIZE", ConfigType::Int, "0",
       "the communicator's size for hmc_comm_create when its options give none; 0: the launcher's "
       "(WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE)",
       "core"},
      {"HMC_RENDEZVOUS", ConfigType::String, "",
       "where the ranks of hmc_comm_create meet: tcp://host:port (rank 0 hosts the store there) or "
       "redis://[[user]:password@]host[:port][/prefix] (a Redis server; docs/collectives.md); "
       "empty: tcp://MASTER_ADDR:MASTER_PORT",
       "core"},
      {"HMC_COLL_ALGO", ConfigType::String, "",
       "force the collectives' algorithm where it applies: ring, recursive_doubling, pairwise, "
       "tree, linear, hierarchical (all-reduce, broadcast, all-gather) or direct; empty: chosen by "
       "size and shape",
       "core"},
      {"HMC_METRICS_ADDR", ConfigType::String, "",
       "serve the context's metrics in Prometheus' text format over HTTP at host:port/metrics "
       "(a port alone: 127.0.0.1; port 0 picks a free one); empty: no endpoint",
       "core"},
      {"HMC_METRICS_FILE", ConfigType::String, "",
       "write the context's metrics in Prometheus' text format to this file when the context is "
       "destroyed; %p is replaced by the pid; empty: none",
       "core"},
      {"HMC_COLL_BACKEND", ConfigType::String, "auto",
       "who runs a communicator's collectives: auto (a ccl plugin's vendor library where every "
       "rank's buffers are device memory it serves, else hmc; a mixed communicator's "
       "hierarchical forms, each vendor group in its library, where one serves a group), hmc "
       "(always hmc's own flat algorithms) or ccl (the vendor library; a device-memory "
       "collective it cannot run fails, barriers and host buffers stay on hmc)",
       "core"},
  };
  return vars;
}

bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (errno || end == text.c_str() || text[0] == '-') return false;
  uint64_t mult = 1;
  std::string suffix(end);
  if (suffix == "" || suffix == "B" || suffix == "b")
    mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    mult = 1ull << 30;
  else
    return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

bool parse_bool(const std::string& text, bool* out) {
  static const char* yes[] = {"1", "y", "yes", "on", "true"};
  static const char* no[] = {"0", "n", "no", "off", "false"};
  for (auto* s : yes)
    if (strcasecmp(text.c_str(), s) == 0) return *out = true, true;
  for (auto* s : no)
    if (strcasecmp(text.c_str(), s) == 0) return *out = false, true;
  return false;
}

bool parse_int(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text.c_str(), &end, 10);
  if (errno || *end != '\0') return false;
  *out = v;
  return true;
}

hmc_status_t Config::load_from_environment() {
  env_.clear();
  for (char** e = environ; e && *e; ++e) {
    const char* eq = strchr(*e, '=');
    if (!eq || strncmp(*e, "HMC_", 4) != 0) continue;
    env_[std::string(*e, eq - *e)] = eq + 1;
  }
  declared_.clear();
  // Everything is declared even past an invalid value, so the table stays complete for
  // hmc-info --config; the first invalid value is reported.
  hmc_status_t first = HMC_SUCCESS;
  std::string first_error;
  for (const auto& v : core_config_vars()) {
    hmc_status_t st = declare(v);
    if (st != HMC_SUCCESS && first == HMC_SUCCESS) first = st, first_error = last_error();
  }
  return first == HMC_SUCCESS ? first : set_error(first, first_error);
}

hmc_status_t Config::declare(const ConfigVar& var) {
  for (const auto& d : declared_)
    if (d.name == var.name) return HMC_SUCCESS;
  declared_.push_back(var);
  return validate(var);
}

hmc_status_t Config::validate(const ConfigVar& var) const {
  auto it = env_.find(var.name);
  if (it == env_.end()) return HMC_SUCCESS;
  const std::string& v = it->second;
  bool ok = true;
  std::string want;
  switch (var.type) {
    case ConfigType::String:
    case ConfigType::List: break;
    case ConfigType::Bool: {
      bool b;
      ok = parse_bool(v, &b);
      want = "a boolean (1/0, yes/no, on/off, true/false)";
      break;
    }
    case ConfigType::Int: {
      // Non-negative, or a negative default itself (HMC_RANK's -1: "not given").
      int64_t i, dflt = 0;
      bool sentinel = parse_int(var.default_value, &dflt) && dflt < 0;
      ok = parse_int(v, &i) && (i >= 0 || (sentinel && i == dflt));
      want = sentinel ? "a non-negative integer, or " + var.default_value
                      : std::string("a non-negative integer");
      break;
    }
    case ConfigType::Size: {
      uint64_t s;
      ok = parse_size(v, &s);
      want = "a size in bytes, optionally with K, M or G";
      break;
    }
    case ConfigType::LogLevel: {
      int l;
      ok = log::parse_level(v, &l);
      want = "one of error, warn, info, debug, trace";
      break;
    }
  }
  if (!ok) return fail(HMC_ERR_CONFIG, "{}='{}' is invalid: expected {}", var.name, v, want);
  return HMC_SUCCESS;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

void Config::warn_unknown() const {
  for (const auto& entry : env_) {
    const std::string& name = entry.first;
    bool known = std::any_of(declared_.begin(), declared_.end(),
                             [&](const ConfigVar& v) { return v.name == name; });
    if (known) continue;
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const auto& v : declared_) {
      size_t d = edit_distance(name, v.name);
      if (d < best_d) best_d = d, best = v.name;
    }
    if (best_d <= 3)
      HMC_LOG_W("{} is not an hmc setting (did you mean {}?); it is ignored", name, best);
    else
      HMC_LOG_W("{} is not an hmc setting; it is ignored (hmc-info --config lists them)", name);
  }
}

std::optional<std::string> Config::raw(const std::string& name) const {
  auto it = env_.find(name);
  if (it == env_.end()) return std::nullopt;
  return it->second;
}

std::string Config::get(const std::string& name) const {
  if (auto v = raw(name)) return *v;
  for (const auto& d : declared_)
    if (d.name == name) return d.default_value;
  return "";
}

int64_t Config::get_int(const std::string& name) const {
  int64_t v = 0;
  parse_int(get(name), &v);
  return v;
}

uint64_t Config::get_size(const std::string& name) const {
  uint64_t v = 0;
  parse_size(get(name), &v);
  return v;
}

bool Config::get_bool(const std::string& name) const {
  bool v = false;
  parse_bool(get(name), &v);
  return v;
}

std::vector<std::string> Config::get_list(const std::string& name, char sep) const {
  std::vector<std::string> out;
  std::string s = get(name), item;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
      if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
      item.clear();
    } else {
      item += s[i];
    }
  }
  return out;
}

const char* Config::c_str(const std::string& name) const {
  auto it = env_.find(name);
  return it == env_.end() ? nullptr : it->second.c_str();
}

}  // namespace hmc

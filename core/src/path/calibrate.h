// Calibration: figures for net devices whose plugin declares no bandwidth or latency (0 in
// hmc_net_device_props_t), measured by the device talking to itself over loopback inside this
// process, so that path choice ranks them on something better than a guess.
//
// What is measured, per device: listen on a second context of the plugin (as a peer process
// has its own; the plugin's own context when it cannot make another), connect from the device's
// context, accept, then a few 8-byte ping-pongs (one-way latency: half the round trip) and a
// stream of 1 MiB messages with a few in flight (bandwidth). One thread plays both sides, so
// both ends' CPU work is serialised, and small-message latency over shared memory reads far
// below what two processes see (no cache line crosses cores):
// a transport that copies on each side (tcp) reads lower than two processes would see; a
// single-copy one (cross-memory attach) does not. Every wait is bounded by the device's budget
// (kDeviceBudgetMs, and kTotalBudgetMs for all devices together); a device that does not finish
// in time stays unmeasured (logged at info level, not an error). The devices are measured in
// three rounds, one after another in each, and each keeps its best bandwidth and latency: a VM
// that slows down for a while then does not rank a device by the spell it was measured in.
//
// What the figures mean: loopback has no wire. For two processes on one host they are the
// estimate (same kernel, same memory). For peers on other hosts they only bound what the wire
// can give (bandwidth at most, latency at least): path/path.h uses them that way, and prefers a
// plugin's declared figures (a NIC's link rate) whenever there are any. The second context
// keeps transports from short-cutting a connection to their own context (UCX's "self", which
// copies in-process and read faster than any real peer when both ends shared one context).
//
// When: lazily, at the first connect or accept of a context (never at context creation, so
// contexts that never connect pay nothing), and at most once per device per process (the
// results are kept in a process-wide table). Skipped when HMC_PATH forces the path, when this
// side offers only one tagged device (nothing to rank), or with HMC_NET_CALIBRATE=0.
//
// Cache: results are kept on disk (HMC_NET_CALIBRATION_CACHE, default
// $XDG_CACHE_HOME/hmc/net-calibration, else ~/.cache/hmc/net-calibration; "off" disables it),
// keyed by a SHA-256 of: this host's identity, the plugin file (real path, size, mtime, inode --
// a rebuilt or upgraded plugin is measured anew), the plugin and device names, the values of the
// plugin's own HMC_ variables, HMC_LISTEN_HOST and every UCX_* / FI_* variable (which steer the
// transport libraries under the plugins), and the method's version. Entries older than
// kCacheMaxAgeS are measured again. The file is rewritten whole through a rename, so a reader
// never sees half of it. A process measures while holding an flock on <cache>.lock (waiting at
// most a few seconds for it), so processes that start together on one host measure one after
// the other, and the later ones find the first one's figures in the cache instead of measuring
// at the same time on shared cores.
//
// Thread-safety: calibrate_capabilities may be called from any thread; calls are serialised by a
// process-wide lock, and every call into a plugin takes that plugin's mutex (never across waits),
// so a progress thread keeps running meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hmc/hmc.h"
#include "hmc/plugin/net.h"
#include "path/path.h"

namespace hmc {
class Config;
class NetPlugin;
struct NetDevice;
}  // namespace hmc

namespace hmc::path {

constexpr int kDeviceBudgetMs = 150;  // one device in one round, connection included
constexpr int kTotalBudgetMs = 1000;  // every device, every round, of one call
constexpr int64_t kCacheMaxAgeS = 30 * 24 * 3600;
constexpr size_t kCacheMaxEntries = 256;

struct Measurement {
  uint64_t bandwidth_MBps = 0;
  uint32_t latency_ns = 0;
};

// Settings from the configuration.
struct CalibrationSettings {
  bool enabled = true;     // HMC_NET_CALIBRATE
  std::string cache_path;  // HMC_NET_CALIBRATION_CACHE resolved; "" = no cache
};
// Reads HMC_NET_CALIBRATE (bool, default 1) and HMC_NET_CALIBRATION_CACHE (path, "off", or unset
// for the default location). An invalid HMC_NET_CALIBRATE is logged as a warning and taken as 1.
CalibrationSettings calibration_settings(const Config& config);

// Second contexts of net plugins for the far ends of loopback measurements (see calibrate.cpp),
// made on first use and finalized with this object. Making one is setup, not measurement: it
// can take longer than a measurement (libfabric 1.17 reads /proc/kallsyms in every
// fi_getinfo), so callers keep it out of their time budgets.
class FarContexts {
 public:
  FarContexts() = default;
  FarContexts(const FarContexts&) = delete;
  FarContexts& operator=(const FarContexts&) = delete;
  ~FarContexts();
  // A second context of dev's plugin in which device dev.index is dev, or nullptr when the
  // plugin cannot make one. Takes the plugin's lock.
  hmc_net_ctx_t* get(NetDevice& dev);

 private:
  std::vector<std::pair<NetPlugin*, hmc_net_ctx_t*>> made_;
};

// Measures one device over loopback within budget_ms, its far end in far's second context of
// the plugin when there is one (far == nullptr: one made for this call, outside the budget). On
// failure returns the status with the thread's error message naming the device and what did
// not work; *out is set only on success.
hmc_status_t measure_device(NetDevice& dev, int budget_ms, Measurement* out,
                            FarContexts* far = nullptr);

// The on-disk cache (see above). Every method is a no-op on an empty path; I/O errors are
// logged at debug level and treated as a miss, never as a failure.
class CalibrationCache {
 public:
  explicit CalibrationCache(std::string path) : path_(std::move(path)) {}
  // The entry under key, if present and younger than max_age_s at `now` (unix seconds).
  bool lookup(const std::string& key, int64_t now, int64_t max_age_s, Measurement* out) const;
  // Adds or replaces the entry (with the name for people reading the file); keeps the newest
  // kCacheMaxEntries. False when the file could not be written.
  bool store(const std::string& key, const std::string& name, const Measurement& m, int64_t now);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The cache key of a device: a hex SHA-256 over the identity described above. plugin_file is
// the plugin's .so; config_text is the settings that steer it (see device_config_text).
std::string calibration_key(const std::string& host_id, const std::string& plugin_file,
                            const std::string& plugin, const std::string& device,
                            const std::string& config_text);
// The settings that steer a plugin: its own variables' values in effect, HMC_LISTEN_HOST, and
// the UCX_* / FI_* variables of the environment, as one sorted text.
std::string device_config_text(const Config& config, const std::string& plugin);

// One device that may be calibrated, with what its cache key needs.
struct CalibrationTarget {
  NetDevice* device = nullptr;
  std::string plugin_file;  // real path of the plugin's .so ("" when unknown: never cached)
  std::string config_text;  // device_config_text of its plugin
};

// What became of one device's calibration (for hmc-info and the log).
struct CalibrationOutcome {
  std::string key;    // "plugin/device"
  std::string state;  // "declared", "measured", "cached in <file>", "failed: <why>",
                      // "not measured yet", "off (HMC_NET_CALIBRATE=0)", "skipped: <why>"
};

enum class CalibrationMode {
  Measure,     // at connect: measure what is missing, when a choice could depend on it
  MeasureAll,  // hmc-info --calibrate: measure what is missing even when nothing is to rank
  LookupOnly,  // hmc-info: what this process or the cache knows; nothing is measured
};

// Fills measured_bandwidth_MBps / measured_latency_ns of the records of caps that lack a
// declared figure, from the process-wide table, the cache, or a measurement, for the targets
// whose "plugin/device" matches a record. Never fails: a device that cannot be measured keeps 0.
// outcomes (may be NULL) receives one entry per record of caps, in order.
void calibrate_capabilities(const CalibrationSettings& settings,
                            const std::vector<CalibrationTarget>& targets, Capabilities* caps,
                            CalibrationMode mode = CalibrationMode::Measure,
                            std::vector<CalibrationOutcome>* outcomes = nullptr);

// Whether calibrating this side could change a choice: false when it offers fewer than two
// tagged devices or none lacks a declared figure.
bool calibration_useful(const Capabilities& caps);

// Forgets the process-wide results (tests).
void reset_calibration_memory();

}  // namespace hmc::path

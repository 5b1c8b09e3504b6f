#include "plugin_host.h"

#include <dlfcn.h>

#include <thread>

namespace hmc::test {

PluginHost::PluginHost(std::map<std::string, std::string> config) : config_(std::move(config)) {
  services_.hdr = HMC_ABI_HEADER_INIT(hmc_host_services_t);
  services_.core_abi_min = HMC_PLUGIN_ABI_VERSION;
  services_.core_abi_max = HMC_PLUGIN_ABI_VERSION;
  services_.host_ctx = this;
  services_.log = cb_log;
  services_.log_enabled = cb_log_enabled;
  services_.config_get = cb_config_get;
  services_.now_ns = cb_now_ns;
  services_.timeout_ms = 10000;
}

PluginHost::~PluginHost() {
  finalize();
  // The plugin stays mapped: nothing relies on dlclose (as in the core).
}

bool PluginHost::load(const std::string& path, std::string* why) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    *why = dlerror();
    return false;
  }
  auto entry =
      reinterpret_cast<hmc_device_plugin_v1_entry_t>(dlsym(handle_, HMC_DEVICE_PLUGIN_ENTRY_V1));
  if (entry == nullptr) {
    *why = path + " has no " HMC_DEVICE_PLUGIN_ENTRY_V1;
    return false;
  }
  table_ = entry();
  return table_ != nullptr;
}

hmc_plugin_status_t PluginHost::init() {
  hmc_device_ctx_t* c = nullptr;
  hmc_plugin_status_t st = table_->init(&services_, &c);
  if (st == HMC_PLUGIN_SUCCESS) ctx_ = c;
  return st;
}

hmc_plugin_status_t PluginHost::finalize() {
  if (ctx_ == nullptr) return HMC_PLUGIN_SUCCESS;
  hmc_plugin_status_t st = table_->finalize(ctx_);
  ctx_ = nullptr;
  return st;
}

std::vector<std::string> PluginHost::logs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return logs_;
}

bool PluginHost::logged(const std::string& fragment) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& l : logs_)
    if (l.find(fragment) != std::string::npos) return true;
  return false;
}

std::string PluginHost::log_text() const {
  std::string all;
  for (const auto& l : logs()) all += l + "\n";
  return all;
}

void PluginHost::cb_log(void* host_ctx, int level, const char* message) {
  static const char* names[] = {"?", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  auto* self = static_cast<PluginHost*>(host_ctx);
  std::lock_guard<std::mutex> lock(self->mutex_);
  self->logs_.push_back(std::string(names[level >= 1 && level <= 5 ? level : 0]) + " " + message);
}

int PluginHost::cb_log_enabled(void*, int) {
  return 1;
}

const char* PluginHost::cb_config_get(void* host_ctx, const char* name) {
  auto* self = static_cast<PluginHost*>(host_ctx);
  auto it = self->config_.find(name);
  return it == self->config_.end() ? nullptr : it->second.c_str();
}

uint64_t PluginHost::cb_now_ns(void*) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

hmc_plugin_status_t wait_event(const hmc_device_plugin_v1_t* t, hmc_device_event_t* ev,
                               std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    hmc_plugin_status_t st = t->event_query(ev);
    if (st != HMC_PLUGIN_IN_PROGRESS || std::chrono::steady_clock::now() > deadline) return st;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void fill_pattern(void* p, size_t size, uint32_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1103515245u + 12345u;
    b[i] = static_cast<uint8_t>(x >> 16);
  }
}

bool check_pattern(const void* p, size_t size, uint32_t seed, size_t* first_bad) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1103515245u + 12345u;
    if (b[i] != static_cast<uint8_t>(x >> 16)) {
      if (first_bad != nullptr) *first_bad = i;
      return false;
    }
  }
  return true;
}

std::string to_hex(const void* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    s += digits[b[i] >> 4];
    s += digits[b[i] & 15];
  }
  return s;
}

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<uint8_t>(nibble(s[i]) << 4 | nibble(s[i + 1])));
  return out;
}

}  // namespace hmc::test

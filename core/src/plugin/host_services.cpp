#include "plugin/host_services.h"

#include "util/clock.h"
#include "util/config.h"
#include "util/log.h"

namespace hmc::plugin {

HostServices::HostServices(std::string prefix, const Config& cfg, std::set<std::string> declared,
                           uint32_t timeout_ms, uint32_t abi_min, uint32_t abi_max)
    : prefix_("[" + prefix + "] "), cfg_(cfg), declared_(std::move(declared)) {
  table_.hdr = HMC_ABI_HEADER_INIT(hmc_host_services_t);
  table_.core_abi_min = abi_min;
  table_.core_abi_max = abi_max;
  table_.host_ctx = this;
  table_.log = &HostServices::cb_log;
  table_.log_enabled = &HostServices::cb_log_enabled;
  table_.config_get = &HostServices::cb_config_get;
  table_.now_ns = &HostServices::cb_now_ns;
  table_.timeout_ms = timeout_ms;
}

void HostServices::begin_capture() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last_problem_.clear();
    last_message_.clear();
  }
  capturing_.store(true, std::memory_order_release);
}

void HostServices::end_capture() {
  capturing_.store(false, std::memory_order_release);
}

std::string HostServices::last_problem() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_problem_;
}

std::string HostServices::last_message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_message_;
}

void HostServices::cb_log(void* host_ctx, int level, const char* message) {
  try {
    auto* self = static_cast<HostServices*>(host_ctx);
    if (level < HMC_LOG_ERROR) level = HMC_LOG_ERROR;
    if (level > HMC_LOG_TRACE) level = HMC_LOG_TRACE;
    const char* text = message ? message : "(null message)";
    if (self->capturing_.load(std::memory_order_acquire) && level <= HMC_LOG_INFO) {
      std::lock_guard<std::mutex> lock(self->mutex_);
      if (level <= HMC_LOG_WARN) self->last_problem_ = text;
      self->last_message_ = text;
    }
    if (log::enabled(level)) log::write(level, self->prefix_ + text);
  } catch (...) {
    // Out of memory while logging: the message is lost, the plugin is not disturbed.
  }
}

int HostServices::cb_log_enabled(void* host_ctx, int level) {
  auto* self = static_cast<HostServices*>(host_ctx);
  if (log::enabled(level)) return 1;
  return self->capturing_.load(std::memory_order_acquire) && level <= HMC_LOG_INFO ? 1 : 0;
}

const char* HostServices::cb_config_get(void* host_ctx, const char* name) {
  if (!name) return nullptr;
  try {
    auto* self = static_cast<HostServices*>(host_ctx);
    std::string n(name);
    if (!self->declared_.count(n)) {
      bool first;
      {
        std::lock_guard<std::mutex> lock(self->mutex_);
        first = self->warned_undeclared_.insert(n).second;
      }
      if (first)
        HMC_LOG_W(
            "{}reads {}, which it does not declare in its config_vars (hmc-info --config "
            "will not list it)",
            self->prefix_, n);
    }
    return self->cfg_.c_str(n);
  } catch (...) {
    return nullptr;
  }
}

uint64_t HostServices::cb_now_ns(void*) {
  return now_ns();
}

}  // namespace hmc::plugin

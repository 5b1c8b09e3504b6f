#include "devplug/errors.h"

#include <cstdio>

namespace hmc::devplug {

const ErrorInfo* ErrorTable::find(int code) const {
  for (size_t i = 0; i < count_; ++i)
    if (entries_[i].code == code) return &entries_[i];
  return nullptr;
}

hmc_plugin_status_t ErrorTable::status(int code) const {
  const ErrorInfo* e = find(code);
  return e != nullptr ? e->status : HMC_PLUGIN_ERR_INTERNAL;
}

std::string ErrorTable::describe(int code, const char* runtime_name) const {
  const ErrorInfo* e = find(code);
  const char* name = e != nullptr                                 ? e->name
                     : (runtime_name != nullptr && *runtime_name) ? runtime_name
                                                                  : "unknown error";
  return std::string(name) + " (" + std::to_string(code) + ")";
}

hmc_plugin_status_t report_failurev(const Log& log, const ErrorTable& table, int code,
                                    const char* runtime_name, const char* fmt, va_list ap) {
  if (log.enabled(HMC_LOG_ERROR)) {
    char what[512];
    std::vsnprintf(what, sizeof what, fmt, ap);
    log.write(HMC_LOG_ERROR, "%s: %s", what, table.describe(code, runtime_name).c_str());
  }
  return table.status(code);
}

hmc_plugin_status_t report_failure(const Log& log, const ErrorTable& table, int code,
                                   const char* runtime_name, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hmc_plugin_status_t st = report_failurev(log, table, code, runtime_name, fmt, ap);
  va_end(ap);
  return st;
}

}  // namespace hmc::devplug

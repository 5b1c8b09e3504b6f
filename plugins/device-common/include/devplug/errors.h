// Vendor error codes: their names (for messages such as "cuInit: CUDA_ERROR_NO_DEVICE (100)") and
// the hmc status each one maps to. Every vendor adapter declares one table of the codes it knows.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <string>

#include "devplug/log.h"
#include "hmc/plugin/common.h"

namespace hmc::devplug {

struct ErrorInfo {
  int code;
  const char* name;            // "CUDA_ERROR_OUT_OF_MEMORY"
  hmc_plugin_status_t status;  // what the plugin's slots return for it
};

class ErrorTable {
 public:
  template <size_t N>
  constexpr ErrorTable(const ErrorInfo (&entries)[N]) : entries_(entries), count_(N) {}

  // The entry for code, or nullptr.
  const ErrorInfo* find(int code) const;
  // The mapped status; HMC_PLUGIN_ERR_INTERNAL for a code the table does not know.
  hmc_plugin_status_t status(int code) const;
  // "NAME (code)": the name from the table, else runtime_name (what the runtime's own
  // get-error-name call answered; may be NULL), else "unknown error".
  std::string describe(int code, const char* runtime_name = nullptr) const;

 private:
  const ErrorInfo* entries_;
  size_t count_;
};

// Logs "<what>: NAME (code)" as an error (what is printf-formatted) and returns the status the
// table maps code to. runtime_name: the runtime's own name for the code, or NULL.
hmc_plugin_status_t report_failure(const Log& log, const ErrorTable& table, int code,
                                   const char* runtime_name, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
hmc_plugin_status_t report_failurev(const Log& log, const ErrorTable& table, int code,
                                    const char* runtime_name, const char* fmt, va_list ap);

}  // namespace hmc::devplug

#include "log.h"

#include <cstdarg>
#include <cstdio>

namespace hmc::ofi {

void Log::write(int level, const char* fmt, ...) const {
  char buf[1024];
  static constexpr char kPrefix[] = "ofi: ";
  int off = std::snprintf(buf, sizeof(buf), "%s", kPrefix);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf + off, sizeof(buf) - static_cast<size_t>(off), fmt, ap);
  va_end(ap);
  host_->log(host_->host_ctx, level, buf);
}

}  // namespace hmc::ofi

#include "devplug/log.h"

#include <cstdarg>
#include <cstdio>

namespace hmc::devplug {

void Log::write(int level, const char* fmt, ...) const {
  if (host_ == nullptr) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  host_->log(host_->host_ctx, level, buf);
}

}  // namespace hmc::devplug

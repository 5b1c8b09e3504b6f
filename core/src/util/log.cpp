#include "util/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <shared_mutex>

namespace hmc::log {
namespace {
std::atomic<int> g_level{HMC_LOG_WARN};
std::mutex g_mutex;
FILE* g_file = nullptr;  // nullptr: stderr
// The application's handler (hmc_log_set_handler). Lines hold the lock shared while they call
// it, so that setting another one waits for the calls of the previous one to end.
std::shared_mutex g_handler_mutex;
hmc_log_handler_t g_handler = nullptr;
void* g_handler_user = nullptr;

const char* level_name(int level) {
  switch (level) {
    case HMC_LOG_ERROR: return "ERROR";
    case HMC_LOG_WARN: return "WARN ";
    case HMC_LOG_INFO: return "INFO ";
    case HMC_LOG_DEBUG: return "DEBUG";
    default: return "TRACE";
  }
}
}  // namespace

bool parse_level(const std::string& text, int* level) {
  static const char* names[] = {"error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 5; ++i) {
    if (strcasecmp(text.c_str(), names[i]) == 0 || text == std::to_string(i + 1)) {
      *level = i + 1;
      return true;
    }
  }
  return false;
}

bool configure(int level, const std::string& file, std::string* err) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_level = level;
  if (file.empty() || file == "stderr") {
    if (g_file) fclose(g_file);
    g_file = nullptr;
    return true;
  }
  std::string path = file;
  for (size_t pos; (pos = path.find("%p")) != std::string::npos;)
    path.replace(pos, 2, std::to_string(getpid()));
  FILE* f = fopen(path.c_str(), "a");
  if (!f) {
    *err = fmt::format("HMC_LOG_FILE: cannot open '{}': {}", path, strerror(errno));
    return false;
  }
  setvbuf(f, nullptr, _IOLBF, 0);
  if (g_file) fclose(g_file);
  g_file = f;
  return true;
}

bool enabled(int level) {
  return level <= g_level.load(std::memory_order_relaxed);
}

void set_handler(hmc_log_handler_t handler, void* user) {
  std::unique_lock<std::shared_mutex> lock(g_handler_mutex);
  g_handler = handler;
  g_handler_user = user;
}

void write(int level, const std::string& message) {
  {
    std::shared_lock<std::shared_mutex> lock(g_handler_mutex);
    if (g_handler) {
      g_handler(level, message.c_str(), g_handler_user);
      return;
    }
  }
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_mutex);
  fprintf(g_file ? g_file : stderr, "[hmc %s.%06ld %d] %s %s\n", stamp, (long)tv.tv_usec,
          (int)getpid(), level_name(level), message.c_str());
}

}  // namespace hmc::log

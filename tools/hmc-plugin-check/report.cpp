#include "report.h"

#include <signal.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "util/log.h"

namespace hmc::check {
namespace {

// Read by the signal handler: fixed storage, written before alarm() is re-armed.
char g_step[160] = "starting";
unsigned g_watchdog_s = 0;
int g_log_level = HMC_LOG_WARN;

// One check's line, and the rule it breaks when there is one (rule: nullptr for none).
void print_line(const char* tag, const std::string& id, const char* rule, const char* fmt,
                va_list ap) {
  char what[1024];
  std::vsnprintf(what, sizeof what, fmt, ap);
  std::printf("  %-5s %s: %s\n", tag, id.c_str(), what);
  if (rule != nullptr) std::printf("        rule: %s\n", rule);
}

void on_alarm(int) {
  char msg[512];
  int n = std::snprintf(msg, sizeof msg,
                        "  FAIL  watchdog: no answer within %u s during '%s'\n"
                        "        rule: no slot blocks longer than a bounded system call (net.h);"
                        " waits belong to the core\n"
                        "FAIL\n",
                        g_watchdog_s, g_step);
  // stdout is line-buffered (main), so what was printed before is out already.
  if (n > 0) (void)!::write(STDOUT_FILENO, msg, std::strlen(msg));
  ::_exit(1);
}

}  // namespace

void watch_step(const char* what) {
  std::snprintf(g_step, sizeof g_step, "%s", what);
  if (g_watchdog_s != 0) ::alarm(g_watchdog_s);
}

void Report::ok(const std::string& id, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_line("ok", id, nullptr, fmt, ap), ++passed_;
  va_end(ap);
}

void Report::fail(const std::string& id, const char* rule, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_line("FAIL", id, rule, fmt, ap), ++failed_;
  va_end(ap);
}

void Report::warn(const std::string& id, const char* rule, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_line("warn", id, rule, fmt, ap), ++warned_;
  va_end(ap);
}

void Report::skip(const std::string& id, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_line("skip", id, nullptr, fmt, ap), ++skipped_;
  va_end(ap);
}

void set_log_level(int level) {
  g_log_level = level;
  std::string err;
  hmc::log::configure(level, "stderr", &err);
}

ExpectedErrors::ExpectedErrors() {
  std::string err;
  if (g_log_level < HMC_LOG_DEBUG) hmc::log::configure(0, "stderr", &err);
}

ExpectedErrors::~ExpectedErrors() {
  std::string err;
  hmc::log::configure(g_log_level, "stderr", &err);
}

void arm_watchdog(unsigned seconds) {
  g_watchdog_s = seconds;
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  ::sigaction(SIGALRM, &sa, nullptr);
  ::alarm(seconds);
}

void disarm_watchdog() {
  g_watchdog_s = 0;
  ::alarm(0);
}

}  // namespace hmc::check

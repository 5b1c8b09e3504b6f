// Process-wide logging: HMC_LOG_LEVEL filters, HMC_LOG_FILE chooses the destination.
#pragma once

#include <fmt/format.h>

#include <string>

#include "hmc/hmc.h"
#include "hmc/plugin/common.h"

namespace hmc::log {

// Parses "error|warn|info|debug|trace" (or 1..5). Returns false on anything else.
bool parse_level(const std::string& text, int* level);
// Sets the level and destination ("" or "stderr": standard error; "%p" in a path becomes the pid).
// Returns false with *err set when the file cannot be opened.
bool configure(int level, const std::string& file, std::string* err);

bool enabled(int level);
// The application's handler of every line written (hmc_log_set_handler); nullptr: the
// destination configure() chose. Waits for running calls of the previous handler.
void set_handler(hmc_log_handler_t handler, void* user);
// Hands the line to the application's handler (hmc_log_set_handler), or writes it with its
// prefix to the destination.
void write(int level, const std::string& message);

template <typename... Args>
void emit(int level, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(level)) write(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace hmc::log

#define HMC_LOG_E(...) ::hmc::log::emit(HMC_LOG_ERROR, __VA_ARGS__)
#define HMC_LOG_W(...) ::hmc::log::emit(HMC_LOG_WARN, __VA_ARGS__)
#define HMC_LOG_I(...) ::hmc::log::emit(HMC_LOG_INFO, __VA_ARGS__)
#define HMC_LOG_D(...) ::hmc::log::emit(HMC_LOG_DEBUG, __VA_ARGS__)
#define HMC_LOG_T(...) ::hmc::log::emit(HMC_LOG_TRACE, __VA_ARGS__)

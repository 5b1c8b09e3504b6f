// Deploy-time settings: every HMC_ variable the core reads is declared once in the table of
// config.cpp (name, type, default, help). Parsing, validation with messages that name the
// variable, the misspelling warning and `hmc-info --config` all come from that table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace hmc {

enum class ConfigType { String, Bool, Int, Size, List, LogLevel };

struct ConfigVar {
  std::string name;
  ConfigType type;
  std::string default_value;  // as text
  std::string help;
  std::string owner;  // "core" or a plugin name
};

// The core's own variables.
const std::vector<ConfigVar>& core_config_vars();

// Parses "123", "64K", "4M", "1G" (powers of 1024). False on garbage or overflow.
bool parse_size(const std::string& text, uint64_t* out);
bool parse_bool(const std::string& text, bool* out);
bool parse_int(const std::string& text, int64_t* out);

// A snapshot of the environment's HMC_ variables, validated against the declared ones.
class Config {
 public:
  // Reads environ. Fails with HMC_ERR_CONFIG (message names the variable) on an invalid value
  // of a declared variable.
  hmc_status_t load_from_environment();
  // Declares more variables (from plugins) and validates their values if set.
  hmc_status_t declare(const ConfigVar& var);
  // Warns once about each set HMC_ variable that nothing declared, suggesting the nearest name.
  void warn_unknown() const;

  // The value if set in the environment, else nullopt.
  std::optional<std::string> raw(const std::string& name) const;
  // The value if set, else the declared default.
  std::string get(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  uint64_t get_size(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  std::vector<std::string> get_list(const std::string& name, char sep = ',') const;

  const std::vector<ConfigVar>& declared() const { return declared_; }
  // The string storage for host services' config_get (stable until the Config dies).
  const char* c_str(const std::string& name) const;

 private:
  hmc_status_t validate(const ConfigVar& var) const;
  std::map<std::string, std::string> env_;
  std::vector<ConfigVar> declared_;
};

}  // namespace hmc

// Plugin selection: HMC_DEVICE_PLUGINS / HMC_NET_PLUGINS / HMC_CCL_PLUGINS, a comma-separated list
// of plugin names in order of preference, where "^name" excludes a plugin. When any name without
// "^" is listed, only the listed plugins are used; an empty or unset list (or one with exclusions
// only) uses every plugin found. Exclusion wins over listing.
#pragma once

#include <string>
#include <vector>

namespace hmc::plugin {

class Selection {
 public:
  enum class Verdict { Use, Excluded, NotListed };

  Selection() = default;
  // var: the variable's name, for messages. items: its value split on ',' and trimmed.
  Selection(std::string var, const std::vector<std::string>& items);

  Verdict judge(const std::string& name) const;
  // Preference rank of a used plugin: its index in the list, or -1 when the list names no
  // plugin (then search order decides).
  int rank(const std::string& name) const;
  // Names the list mentions (listed or excluded) that are not among `found`, in list order.
  std::vector<std::string> unknown_names(const std::vector<std::string>& found) const;

  const std::string& var() const { return var_; }
  bool restrictive() const { return !order_.empty(); }
  const std::vector<std::string>& order() const { return order_; }
  const std::vector<std::string>& excluded() const { return excluded_; }

 private:
  std::string var_;
  std::vector<std::string> order_;     // positive names, first mention wins, duplicates dropped
  std::vector<std::string> excluded_;  // names after '^'
};

}  // namespace hmc::plugin

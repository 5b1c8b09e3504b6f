#include "plugin/select.h"

#include <algorithm>

#include "plugin/kind.h"

namespace hmc::plugin {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Device: return "device";
    case Kind::Net: return "net";
    case Kind::Ccl: return "ccl";
    case Kind::Unknown: break;
  }
  return "unknown";
}

const char* selection_var(Kind kind) {
  switch (kind) {
    case Kind::Device: return "HMC_DEVICE_PLUGINS";
    case Kind::Ccl: return "HMC_CCL_PLUGINS";
    default: return "HMC_NET_PLUGINS";
  }
}

namespace {
bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

Selection::Selection(std::string var, const std::vector<std::string>& items)
    : var_(std::move(var)) {
  for (const auto& item : items) {
    if (item.empty()) continue;
    if (item[0] == '^') {
      std::string name = item.substr(1);
      if (!name.empty() && !contains(excluded_, name)) excluded_.push_back(name);
    } else if (!contains(order_, item)) {
      order_.push_back(item);
    }
  }
}

Selection::Verdict Selection::judge(const std::string& name) const {
  if (contains(excluded_, name)) return Verdict::Excluded;
  if (restrictive() && !contains(order_, name)) return Verdict::NotListed;
  return Verdict::Use;
}

int Selection::rank(const std::string& name) const {
  auto it = std::find(order_.begin(), order_.end(), name);
  return it == order_.end() ? -1 : static_cast<int>(it - order_.begin());
}

std::vector<std::string> Selection::unknown_names(const std::vector<std::string>& found) const {
  std::vector<std::string> out;
  for (const auto* list : {&order_, &excluded_})
    for (const auto& n : *list)
      if (!contains(found, n) && !contains(out, n)) out.push_back(n);
  return out;
}

}  // namespace hmc::plugin

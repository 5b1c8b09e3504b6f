#include "devplug/library.h"

#include <dlfcn.h>

#include <cstring>

namespace hmc::devplug {

bool Library::open(const std::vector<std::string>& names, std::string* why) {
  std::string errors;
  for (const std::string& n : names) {
    void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      handle_ = h;
      name_ = n;
      return true;
    }
    const char* err = dlerror();
    if (!errors.empty()) errors += "; ";
    errors += err != nullptr ? err : (n + ": not loaded");
  }
  if (why != nullptr) *why = names.empty() ? std::string("no library name to open") : errors;
  return false;
}

void* Library::symbol(const char* name) const {
  if (handle_ == nullptr) return nullptr;
  return dlsym(handle_, name);
}

std::vector<std::string> companion_candidates(const std::string& main_library,
                                              const std::vector<std::string>& names) {
  std::vector<std::string> out;
  size_t slash = main_library.rfind('/');
  if (slash != std::string::npos) {
    std::string dir = main_library.substr(0, slash + 1);
    for (const std::string& n : names)
      if (n.find('/') == std::string::npos) out.push_back(dir + n);
  }
  out.insert(out.end(), names.begin(), names.end());
  return out;
}

bool resolve_symbols(void* api, const std::vector<SymbolSpec>& specs,
                     const MainResolver& resolve_main, const std::string& main_name,
                     const Library& companion, const Log& log,
                     std::vector<std::pair<size_t, const char*>>* resolved, std::string* why) {
  for (const SymbolSpec& s : specs) {
    void* fn = nullptr;
    for (const SymbolName& n : s.alt) {
      if (n.name == nullptr) break;
      fn = s.from == From::Main ? resolve_main(n) : companion.symbol(n.name);
      if (fn != nullptr) {
        resolved->push_back({s.offset, n.name});
        break;
      }
    }
    if (fn != nullptr) {
      store_symbol(api, s, fn);
      continue;
    }
    const std::string& lib = s.from == From::Main ? main_name : companion.name();
    std::string what = s.alt[0].name;
    if (s.alt[0].version != 0) what += " (ABI version " + std::to_string(s.alt[0].version) + ")";
    if (s.required) {
      *why = (lib.empty() ? std::string("the runtime") : lib) + " lacks " + what;
      return false;
    }
    if (s.from == From::Main || companion.is_open())
      DP_DEBUG(log, "%s lacks the optional %s", lib.c_str(), what.c_str());
  }
  return true;
}

void store_symbol(void* api, const SymbolSpec& spec, void* fn) {
  std::memcpy(static_cast<char*>(api) + spec.offset, &fn, sizeof fn);
}

bool has_symbol(const void* api, const SymbolSpec& spec) {
  void* fn = nullptr;
  std::memcpy(&fn, static_cast<const char*>(api) + spec.offset, sizeof fn);
  return fn != nullptr;
}

}  // namespace hmc::devplug

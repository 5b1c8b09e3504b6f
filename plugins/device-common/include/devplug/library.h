// Loading a vendor runtime at run time, and the tables of function pointers resolved from it.
//
// A plugin declares its own prototypes for every runtime function it calls (so it builds without
// the vendor's SDK) and resolves them into an "Api" struct of function pointers, each marked
// required or optional. A missing optional function means a missing feature, never a failure.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "devplug/log.h"

namespace hmc::devplug {

// A shared library opened with dlopen. Never dlclosed: vendor runtimes keep threads and atexit
// handlers that outlive finalize, and the application may use the same library itself.
class Library {
 public:
  // Opens the first of names that loads (a file name, searched the usual way, or a path). A
  // library the process has loaded already is reused (RTLD_NOLOAD is tried first for every name).
  // On failure, *why lists each name with dlerror's answer, and false is returned.
  bool open(const std::vector<std::string>& names, std::string* why);
  bool is_open() const { return handle_ != nullptr; }
  // dlsym through the library's handle (the library, then its own dependencies), or nullptr when
  // none has the symbol (or the library is not open).
  void* symbol(const char* name) const;
  // The name that opened, as given to open().
  const std::string& name() const { return name_; }

 private:
  void* handle_ = nullptr;
  std::string name_;
};

// Which library of a runtime a function comes from: the main one (libcuda, libamdhip64, libcnrt,
// libmusart) or its companion (the MUSA and CNDrv drivers, for dma-buf and device identity).
enum class From { Main, Companion };

// One way to find a function: its exported name, and for CUDA's cuGetProcAddress the ABI
// version whose prototype we declared (0 elsewhere).
struct SymbolName {
  const char* name = nullptr;
  int version = 0;
};

// One slot of an Api struct: where the pointer goes, whether the plugin can work without it, and
// up to two ways to find it (tried in order: the newer ABI first, then an older one with the same
// prototype, or a renamed twin such as hipHostMalloc / hipHostAlloc).
struct SymbolSpec {
  size_t offset;  // offsetof(Api, member)
  bool required;
  From from;
  SymbolName alt[2];
};

#define DP_SYMBOL(Api, member, required, from, ...) \
  ::hmc::devplug::SymbolSpec {                      \
    offsetof(Api, member), required, from, {        \
      __VA_ARGS__                                   \
    }                                               \
  }

// The names to try for a runtime's companion library (CNDrv beside CNRT, libmusa beside
// libmusart): when the main library was given as a path, each name in that directory first, then
// the names as they are (the search path, or a library the process has already loaded).
std::vector<std::string> companion_candidates(const std::string& main_library,
                                              const std::vector<std::string>& names);

// Fills the Api struct at api from specs: functions of the main library through resolve_main
// (dlsym, or CUDA's cuGetProcAddress), those of the companion with dlsym. Records which name each
// member came from in *resolved (for messages). False with *why ("libcuda.so.1 lacks cuMemAlloc
// (ABI version 3020)") when a required function is missing; a missing optional one is logged at
// debug level.
using MainResolver = std::function<void*(const SymbolName&)>;
bool resolve_symbols(void* api, const std::vector<SymbolSpec>& specs,
                     const MainResolver& resolve_main, const std::string& main_name,
                     const Library& companion, const Log& log,
                     std::vector<std::pair<size_t, const char*>>* resolved, std::string* why);

// Stores fn into the Api struct at spec.offset (every member is a function pointer).
void store_symbol(void* api, const SymbolSpec& spec, void* fn);
// True when the Api struct's member at spec.offset is set.
bool has_symbol(const void* api, const SymbolSpec& spec);

}  // namespace hmc::devplug

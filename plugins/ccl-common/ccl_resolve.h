// Resolving a vendor library's functions, shared by the ccl plugins of this tree (compiled into
// each: plugins never link the core).
#pragma once

#include <dlfcn.h>

#include <string>

namespace hmc::plugin::ccl {

// *out = the function `name` of lib; the first name missing is kept in *missing.
template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

}  // namespace hmc::plugin::ccl

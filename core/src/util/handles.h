// Validation of opaque handles crossing the C API: every live handle is recorded with its kind,
// so a freed, foreign or mistyped handle is answered with HMC_ERR_INVALID_HANDLE instead of a
// crash (as long as its memory was not reused for a handle of the same kind).
#pragma once

#include <mutex>
#include <unordered_map>

namespace hmc {

enum class HandleKind {
  Context,
  Peer,
  Region,
  Remote,
  XferList,
  Comm,
  kCount
};  // requests: see request/request.h

class Handles {
 public:
  static void add(const void* h, HandleKind kind);
  static void remove(const void* h);
  static bool valid(const void* h, HandleKind kind);
};

}  // namespace hmc

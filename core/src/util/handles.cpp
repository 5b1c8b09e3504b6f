#include "util/handles.h"

namespace hmc {
namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<const void*, HandleKind>& registry() {
  static auto* r = new std::unordered_map<const void*, HandleKind>();  // never destroyed: safe at exit
  return *r;
}
}  // namespace

void Handles::add(const void* h, HandleKind kind) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[h] = kind;
}

void Handles::remove(const void* h) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(h);
}

bool Handles::valid(const void* h, HandleKind kind) {
  if (!h) return false;
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(h);
  return it != registry().end() && it->second == kind;
}

}  // namespace hmc

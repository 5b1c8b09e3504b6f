// Slots that every ccl plugin of this tree answers the same way from its context, compiled into
// each (plugins never link the core). Ctx has `int devices`, and `std::string unavailable` and
// `std::string library`, empty when there is nothing to say.
#pragma once

#include "hmc/plugin/ccl.h"

namespace hmc::plugin::ccl {

template <typename Ctx>
hmc_plugin_status_t ctx_device_count(Ctx* ctx, int* count) {
  if (!ctx || !count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = ctx->devices;
  return HMC_PLUGIN_SUCCESS;
}

template <typename Ctx>
const char* ctx_unavailable_reason(Ctx* ctx) {
  return ctx && !ctx->unavailable.empty() ? ctx->unavailable.c_str() : nullptr;
}

template <typename Ctx>
const char* ctx_library_version(Ctx* ctx) {
  return ctx && !ctx->library.empty() ? ctx->library.c_str() : nullptr;
}

}  // namespace hmc::plugin::ccl

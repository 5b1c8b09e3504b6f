// One side's message buffers for hmc-perf: an area of `slots` messages on one device (allocated
// with hmc_mem_alloc), with pattern fill/check/poison that go through a host staging buffer and
// hmc_mem_copy when the device's memory is not host-accessible.
#pragma once

#include <cstring>
#include <hmc/hmc.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "pattern.h"

namespace hmc::perf {

// True when `device` is host memory; throws std::runtime_error when no such device exists.
inline bool device_is_host(const hmc::Context& ctx, const std::string& device) {
  std::string names;
  for (const auto& d : ctx.devices()) {
    if (device == d.name) return d.is_host != 0;
    names += names.empty() ? "" : ", ";
    names += d.name;
  }
  throw std::runtime_error("no device named '" + device + "' (devices: " + names +
                           "; hmc-info lists them)");
}

class Buffers {
 public:
  Buffers() = default;
  // bytes: the whole area; max_message: the largest single fill/check (staging size).
  Buffers(hmc::Context& ctx, const std::string& device, size_t bytes, size_t max_message)
      : ctx_(&ctx),
        device_(device),
        host_(device_is_host(ctx, device)),
        mem_(ctx.alloc(device, bytes)) {
    if (!host_) staging_.resize(max_message);
    // First touch outside any timed loop, so page faults are not measured.
    poison(0, bytes);
  }

  explicit operator bool() const { return static_cast<bool>(mem_); }
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(mem_.data()) + offset; }
  size_t size() const { return mem_.size(); }
  const std::string& device() const { return device_; }

  void fill(size_t offset, size_t n, uint64_t seed) {
    if (host_) return pattern_fill(at(offset), n, seed);
    pattern_fill(staging_.data(), n, seed);
    ctx_->copy(at(offset), staging_.data(), n);
  }
  // First bad offset within [offset, offset+n) relative to offset, or n when all match.
  size_t check(size_t offset, size_t n, uint64_t seed) {
    if (host_) return pattern_check(at(offset), n, seed);
    ctx_->copy(staging_.data(), at(offset), n);
    return pattern_check(staging_.data(), n, seed);
  }
  void poison(size_t offset, size_t n) {
    if (host_) {
      std::memset(at(offset), kPoison, n);
      return;
    }
    std::vector<uint8_t> p(std::min(n, staging_.size() > 0 ? staging_.size() : n), kPoison);
    for (size_t done = 0; done < n; done += p.size())
      ctx_->copy(at(offset + done), p.data(), std::min(p.size(), n - done));
  }

 private:
  hmc::Context* ctx_ = nullptr;
  std::string device_;
  bool host_ = true;
  hmc::Memory mem_;
  std::vector<uint8_t> staging_;
};

}  // namespace hmc::perf

// Small helpers shared by the plugin's files.
#pragma once

#include <unistd.h>

#include <cstdint>

namespace hmc::ofi {

// 64 random bits from the kernel (getrandom), never 0: listener ids, connection nonces,
// requested memory keys.
uint64_t random_u64();

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace hmc::ofi

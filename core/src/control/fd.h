// Fd: the one owner of a file descriptor. Closing happens exactly once, in the destructor or in
// reset(); moving transfers ownership. Thread-compatible (like any value type).
#pragma once

#include <unistd.h>

#include <utility>

namespace hmc::control {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }

  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing; returns the descriptor (-1 when empty).
  int release() { return std::exchange(fd_, -1); }
  // Closes the owned descriptor (if any) and takes ownership of fd.
  void reset(int fd = -1) {
    int old = std::exchange(fd_, fd);
    // close() is not retried on EINTR: on Linux the descriptor is released even then.
    if (old >= 0 && old != fd) ::close(old);
  }

 private:
  int fd_ = -1;
};

}  // namespace hmc::control

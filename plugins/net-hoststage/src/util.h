// Small RAII and helper types shared by every file of the plugin: file descriptors, shared
// mappings, randomness. Nothing here knows about the protocol.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace hmc::hoststage {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Owns one mmap()ed range; unmaps it on destruction. Move-only.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t len) : addr_(addr), len_(len) {}
  ~Mapping() { reset(); }
  Mapping(Mapping&& other) noexcept : addr_(other.addr_), len_(other.len_) {
    other.addr_ = nullptr;
    other.len_ = 0;
  }
  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      reset();
      addr_ = other.addr_;
      len_ = other.len_;
      other.addr_ = nullptr;
      other.len_ = 0;
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
  size_t size() const { return len_; }
  void reset() {
    if (addr_ != nullptr) ::munmap(addr_, len_);
    addr_ = nullptr;
    len_ = 0;
  }

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

// 64 random bits from the kernel (getrandom), never 0. Used for connection nonces, region keys
// and socket names: values a peer must not be able to guess.
uint64_t random_u64();

inline size_t align_up(size_t v, size_t a) {
  return (v + a - 1) & ~(a - 1);
}

}  // namespace hmc::hoststage

// Buffer arguments: anything with the buffer protocol, an hmc.Memory, or a raw (pointer, size)
// pair for memory Python does not see.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>

namespace hmcpy {

struct Memory;

// A buffer argument resolved into an address and a size, holding what backs it for as long as
// hmc may touch it: the exported buffer (so a bytearray cannot be resized, nor its memory
// freed, under a request), or a reference to the Memory object (which then refuses to be
// freed). Created and destroyed with the GIL held.
class Pinned {
 public:
  // writable: the buffer will be written (recv, get, the destination of a copy). call names the
  // operation in errors (hmc.InvalidArgumentError).
  static std::unique_ptr<Pinned> from(pybind11::handle obj, bool writable, const char* call);
  ~Pinned();
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;

  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }
  // False for a read-only buffer (bytes, a read-only memoryview).
  bool writable() const { return !has_view_ || !view_.readonly; }

 private:
  Pinned() = default;
  void* ptr_ = nullptr;
  size_t size_ = 0;
  Py_buffer view_{};
  bool has_view_ = false;
  pybind11::object owner_;
  std::shared_ptr<Memory> memory_;
};

}  // namespace hmcpy

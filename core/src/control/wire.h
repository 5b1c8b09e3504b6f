// Bounds-checked little-endian serialisation of control-plane payloads.
//
// Writer appends; it cannot fail. Reader never reads past the end of its buffer and never
// allocates more than the caller's max_len (nor more than the bytes actually remaining) from a
// length that came off the wire. The first failed read makes the Reader sticky-failed: ok()
// turns false and every later read fails too, so a decoder may read all fields and check ok()
// once at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::control {

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  // Raw bytes, no length prefix (fixed-size fields such as nonces).
  void bytes(const void* p, size_t n);
  // u32 length + bytes. Strings longer than 4 GiB are a caller bug (aborts in debug builds).
  void str(const std::string& s);
  // u32 length + bytes (a length-prefixed binary blob, read back with Reader::blob).
  void blob(const void* p, size_t n);
  void blob(const std::vector<uint8_t>& v) { blob(v.data(), v.size()); }

  const std::vector<uint8_t>& data() const { return buf_; }
  size_t size() const { return buf_.size(); }
  void clear() { buf_.clear(); }

 private:
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(p ? n : 0) {}
  explicit Reader(const std::vector<uint8_t>& v) : Reader(v.data(), v.size()) {}

  bool u8(uint8_t* v);
  bool u16(uint16_t* v);
  bool u32(uint32_t* v);
  bool u64(uint64_t* v);
  bool i32(int32_t* v);
  bool i64(int64_t* v);
  // Accepts 0 or 1 only (anything else fails: one encoding per value).
  bool boolean(bool* v);
  bool bytes(void* out, size_t n);
  // u32 length + bytes; fails when the length exceeds max_len or the remaining bytes.
  bool str(std::string* out, size_t max_len);
  bool blob(std::vector<uint8_t>* out, size_t max_len);
  // Advances n bytes without copying.
  bool skip(size_t n);

  size_t remaining() const { return ok_ ? n_ - pos_ : 0; }
  size_t position() const { return pos_; }
  bool ok() const { return ok_; }
  // ok() and every byte consumed: what a strict decoder checks at the end.
  bool done() const { return ok_ && pos_ == n_; }
  // Marks the reader failed (a decoder found a semantically invalid value).
  void set_failed() { ok_ = false; }

 private:
  // True when n more bytes are there; otherwise fails the reader.
  bool need(size_t n);
  bool length_prefix(size_t max_len, uint32_t* len);

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace hmc::control

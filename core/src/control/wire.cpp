#include "control/wire.h"

#include <cassert>
#include <cstring>

namespace hmc::control {

void Writer::u16(uint16_t v) {
  buf_.push_back(static_cast<uint8_t>(v));
  buf_.push_back(static_cast<uint8_t>(v >> 8));
}

void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::bytes(const void* p, size_t n) {
  if (n == 0) return;
  const uint8_t* b = static_cast<const uint8_t*>(p);
  buf_.insert(buf_.end(), b, b + n);
}

void Writer::str(const std::string& s) {
  blob(s.data(), s.size());
}

void Writer::blob(const void* p, size_t n) {
  assert(n <= UINT32_MAX);
  u32(static_cast<uint32_t>(n));
  bytes(p, n);
}

bool Reader::need(size_t n) {
  if (!ok_ || n > n_ - pos_) {
    ok_ = false;
    return false;
  }
  return true;
}

bool Reader::u8(uint8_t* v) {
  if (!need(1)) return false;
  *v = p_[pos_++];
  return true;
}

bool Reader::u16(uint16_t* v) {
  if (!need(2)) return false;
  *v = static_cast<uint16_t>(p_[pos_] | (p_[pos_ + 1] << 8));
  pos_ += 2;
  return true;
}

bool Reader::u32(uint32_t* v) {
  if (!need(4)) return false;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>(p_[pos_ + i]) << (8 * i);
  pos_ += 4;
  *v = r;
  return true;
}

bool Reader::u64(uint64_t* v) {
  if (!need(8)) return false;
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
  pos_ += 8;
  *v = r;
  return true;
}

bool Reader::i32(int32_t* v) {
  uint32_t u;
  if (!u32(&u)) return false;
  *v = static_cast<int32_t>(u);
  return true;
}

bool Reader::i64(int64_t* v) {
  uint64_t u;
  if (!u64(&u)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}

bool Reader::boolean(bool* v) {
  uint8_t b;
  if (!u8(&b)) return false;
  if (b > 1) {
    ok_ = false;
    return false;
  }
  *v = b != 0;
  return true;
}

bool Reader::bytes(void* out, size_t n) {
  if (!need(n)) return false;
  if (n) memcpy(out, p_ + pos_, n);
  pos_ += n;
  return true;
}

bool Reader::skip(size_t n) {
  if (!need(n)) return false;
  pos_ += n;
  return true;
}

bool Reader::length_prefix(size_t max_len, uint32_t* len) {
  if (!u32(len)) return false;
  // Checked before anything is allocated: the length is attacker-controlled.
  if (*len > max_len || !need(*len)) {
    ok_ = false;
    return false;
  }
  return true;
}

bool Reader::str(std::string* out, size_t max_len) {
  uint32_t len;
  if (!length_prefix(max_len, &len)) return false;
  out->assign(reinterpret_cast<const char*>(p_ + pos_), len);
  pos_ += len;
  return true;
}

bool Reader::blob(std::vector<uint8_t>* out, size_t max_len) {
  uint32_t len;
  if (!length_prefix(max_len, &len)) return false;
  out->assign(p_ + pos_, p_ + pos_ + len);
  pos_ += len;
  return true;
}

}  // namespace hmc::control

#include "wire.h"

namespace hmc::ucx::wire {

namespace {

void put_identity(uint8_t* p, const ProcessIdentity& id) {
  put_u64(p, id.boot);
  put_u64(p + 8, id.pidns);
  put_u64(p + 16, id.start);
  put_u32(p + 24, id.pid);
}

ProcessIdentity get_identity(const uint8_t* p) {
  ProcessIdentity id;
  id.boot = get_u64(p);
  id.pidns = get_u64(p + 8);
  id.start = get_u64(p + 16);
  id.pid = get_u32(p + 24);
  return id;
}

// Common header check: magic and version; *why says what was wrong.
bool check_header(const uint8_t* p, size_t n, size_t min, uint32_t magic, const char* what,
                  std::string* why) {
  if (n < min) {
    *why = std::string(what) + " too short (" + std::to_string(n) + " bytes)";
    return false;
  }
  if (get_u32(p) != magic) {
    *why = std::string("not a ucx plugin ") + what + " (wrong magic)";
    return false;
  }
  if (p[4] != kVersion) {
    *why = std::string(what) + " of protocol version " + std::to_string(p[4]) +
           ", this plugin speaks version " + std::to_string(kVersion);
    return false;
  }
  return true;
}

}  // namespace

size_t encode_handle(const Handle& h, uint8_t* out, size_t cap) {
  size_t n = kHandleHeader + h.address_len;
  if (n > cap || h.address_len > 0xffff) return 0;
  put_u32(out, kHandleMagic);
  out[4] = kVersion;
  out[5] = h.flags;
  put_u16(out + 6, h.listener_id);
  put_u64(out + 8, h.nonce);
  put_u16(out + 16, static_cast<uint16_t>(h.address_len));
  for (size_t i = 0; i < h.address_len; ++i) out[kHandleHeader + i] = h.address[i];
  return n;
}

bool decode_handle(const uint8_t* p, size_t n, Handle* out, std::string* why) {
  if (!check_header(p, n, kHandleHeader, kHandleMagic, "connection handle", why)) return false;
  Handle h;
  h.flags = p[5];
  h.listener_id = get_u16(p + 6);
  h.nonce = get_u64(p + 8);
  h.address_len = get_u16(p + 16);
  if (h.listener_id == 0) {
    *why = "connection handle names listener id 0";
    return false;
  }
  if (h.address_len == 0 || kHandleHeader + h.address_len != n) {
    *why = "connection handle length " + std::to_string(n) + " does not match its address (" +
           std::to_string(h.address_len) + " bytes)";
    return false;
  }
  h.address = p + kHandleHeader;
  *out = h;
  return true;
}

void encode_hello(const Hello& h, std::vector<uint8_t>* out) {
  out->assign(kHelloHeader + h.address_len, 0);
  uint8_t* p = out->data();
  put_u32(p, kHelloMagic);
  p[4] = kVersion;
  put_u16(p + 6, h.rx_id);
  put_u64(p + 8, h.nonce);
  put_identity(p + 16, h.who);
  put_u32(p + 16 + kIdentitySize, static_cast<uint32_t>(h.address_len));
  for (size_t i = 0; i < h.address_len; ++i) p[kHelloHeader + i] = h.address[i];
}

bool decode_hello(const uint8_t* p, size_t n, Hello* out, std::string* why) {
  if (!check_header(p, n, kHelloHeader, kHelloMagic, "hello", why)) return false;
  Hello h;
  h.rx_id = get_u16(p + 6);
  h.nonce = get_u64(p + 8);
  h.who = get_identity(p + 16);
  h.address_len = get_u32(p + 16 + kIdentitySize);
  if (h.rx_id == 0 || h.address_len == 0 || kHelloHeader + h.address_len != n) {
    *why = "malformed hello (rx id " + std::to_string(h.rx_id) + ", address of " +
           std::to_string(h.address_len) + " bytes in " + std::to_string(n) + ")";
    return false;
  }
  h.address = p + kHelloHeader;
  *out = h;
  return true;
}

void encode_welcome(const Welcome& w, std::vector<uint8_t>* out) {
  out->assign(kWelcomeSize, 0);
  uint8_t* p = out->data();
  put_u32(p, kWelcomeMagic);
  p[4] = kVersion;
  put_u16(p + 6, w.listener_id);
  put_u64(p + 8, w.nonce);
  put_identity(p + 16, w.who);
}

bool decode_welcome(const uint8_t* p, size_t n, Welcome* out, std::string* why) {
  if (!check_header(p, n, kWelcomeSize, kWelcomeMagic, "welcome", why)) return false;
  if (n != kWelcomeSize) {
    *why = "welcome of " + std::to_string(n) + " bytes";
    return false;
  }
  out->listener_id = get_u16(p + 6);
  out->nonce = get_u64(p + 8);
  out->who = get_identity(p + 16);
  return true;
}

void encode_bye(uint64_t nonce, std::vector<uint8_t>* out) {
  out->assign(kByeSize, 0);
  uint8_t* p = out->data();
  put_u32(p, kByeMagic);
  p[4] = kVersion;
  put_u64(p + 8, nonce);
}

bool decode_bye(const uint8_t* p, size_t n, uint64_t* nonce) {
  std::string why;
  if (n != kByeSize || !check_header(p, n, kByeSize, kByeMagic, "bye", &why)) return false;
  *nonce = get_u64(p + 8);
  return true;
}

}  // namespace hmc::ucx::wire

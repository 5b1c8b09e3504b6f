#include "handle.h"

#include <arpa/inet.h>

#include <cstring>

#include "wire.h"

namespace hmc::hoststage {

namespace {

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

constexpr size_t kFixed = 12;  // version, device, reserved, nonce

}  // namespace

size_t encode_handle(const ConnHandle& h, uint8_t* out, size_t cap) {
  size_t need = kFixed;
  if (h.dev == DevKind::kTcp) {
    if (h.addrs.empty() || h.addrs.size() > kMaxHandleAddrs) return 0;
    need += 1 + 6 * h.addrs.size();
  } else {
    if (h.unix_name.empty() || h.unix_name.size() > kMaxUnixName) return 0;
    need += 5 + h.unix_name.size();
  }
  if (need > cap) return 0;
  out[0] = kProtocolVersion;
  out[1] = static_cast<uint8_t>(h.dev);
  out[2] = out[3] = 0;
  put_le(out + 4, h.nonce, 8);
  uint8_t* p = out + kFixed;
  if (h.dev == DevKind::kTcp) {
    *p++ = static_cast<uint8_t>(h.addrs.size());
    for (const TcpAddr& a : h.addrs) {
      std::memcpy(p, &a.ip_be, 4);
      uint16_t port_be = htons(a.port);
      std::memcpy(p + 4, &port_be, 2);
      p += 6;
    }
  } else {
    put_le(p, h.pid, 4);
    p[4] = static_cast<uint8_t>(h.unix_name.size());
    std::memcpy(p + 5, h.unix_name.data(), h.unix_name.size());
  }
  return need;
}

bool decode_handle(const uint8_t* in, size_t len, ConnHandle* h, std::string* why) {
  if (in == nullptr || len < kFixed + 1) {
    *why = "handle too short (" + std::to_string(len) + " bytes)";
    return false;
  }
  if (in[0] != kProtocolVersion) {
    *why = "handle protocol version " + std::to_string(in[0]) + ", this plugin speaks " +
           std::to_string(kProtocolVersion);
    return false;
  }
  ConnHandle r;
  if (in[1] > 1) {
    *why = "handle names unknown device " + std::to_string(in[1]);
    return false;
  }
  r.dev = static_cast<DevKind>(in[1]);
  r.nonce = get_le(in + 4, 8);
  const uint8_t* p = in + kFixed;
  size_t left = len - kFixed;
  if (r.dev == DevKind::kTcp) {
    size_t n = p[0];
    if (n == 0 || n > kMaxHandleAddrs || left != 1 + 6 * n) {
      *why = "tcp handle has a bad address list";
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      TcpAddr a{};
      std::memcpy(&a.ip_be, p + 1 + 6 * i, 4);
      uint16_t port_be = 0;
      std::memcpy(&port_be, p + 5 + 6 * i, 2);
      a.port = ntohs(port_be);
      if (a.port == 0) {
        *why = "tcp handle has port 0";
        return false;
      }
      r.addrs.push_back(a);
    }
  } else {
    if (left < 5) {
      *why = "shm handle too short";
      return false;
    }
    r.pid = static_cast<uint32_t>(get_le(p, 4));
    size_t n = p[4];
    if (n == 0 || n > kMaxUnixName || left != 5 + n) {
      *why = "shm handle has a bad socket name";
      return false;
    }
    r.unix_name.assign(reinterpret_cast<const char*>(p + 5), n);
  }
  *h = std::move(r);
  return true;
}

std::string ip_to_string(uint32_t ip_be) {
  char buf[INET_ADDRSTRLEN] = {0};
  in_addr a{};
  a.s_addr = ip_be;
  ::inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

}  // namespace hmc::hoststage

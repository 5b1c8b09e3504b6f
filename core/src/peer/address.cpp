#include "peer/address.h"

#include <cstdlib>

#include "control/wire.h"
#include "util/status.h"

namespace hmc {
namespace {
constexpr uint32_t kAddressMagic = 0x41434d48;  // "HMCA"
constexpr uint16_t kAddressVersion = 1;
}  // namespace

std::vector<uint8_t> encode_address(const Address& a) {
  control::Writer w;
  w.u32(kAddressMagic);
  w.u16(kAddressVersion);
  w.str(a.host_id);
  w.str(a.hostname);
  w.i32(a.pid);
  w.u64(a.context_id);
  w.str(a.unix_name);
  w.str(a.tcp_host);
  w.u16(a.tcp_port);
  return w.data();
}

hmc_status_t decode_address(const void* data, size_t len, Address* out) {
  control::Reader r(static_cast<const uint8_t*>(data), len);
  uint32_t magic = 0;
  uint16_t version = 0;
  if (!r.u32(&magic) || magic != kAddressMagic)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_connect: the {}-byte blob is not an hmc address "
                "(use hmc_address or hmc_address_from_host to make one)",
                len);
  if (!r.u16(&version) || version != kAddressVersion)
    return fail(HMC_ERR_VERSION, "hmc_connect: address blob version {}, this library reads {}",
                version, kAddressVersion);
  Address a;
  if (!r.str(&a.host_id, 256) || !r.str(&a.hostname, 256) || !r.i32(&a.pid) ||
      !r.u64(&a.context_id) || !r.str(&a.unix_name, 108) || !r.str(&a.tcp_host, 256) ||
      !r.u16(&a.tcp_port))
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_connect: the address blob is truncated or corrupt");
  if (a.unix_name.empty() && (a.tcp_host.empty() || a.tcp_port == 0))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_connect: the address has neither a Unix socket "
                "nor a TCP host and port");
  *out = std::move(a);
  return HMC_SUCCESS;
}

hmc_status_t parse_host_port(const std::string& text, Address* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(HMC_ERR_INVALID_ARGUMENT, "'{}' is not [ipv6]:port", text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return fail(HMC_ERR_INVALID_ARGUMENT, "'{}' is not host:port", text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p <= 0 || p > 65535)
    return fail(HMC_ERR_INVALID_ARGUMENT, "'{}': port '{}' is not a number in 1..65535", text,
                port);
  Address a;
  a.tcp_host = host;
  a.tcp_port = static_cast<uint16_t>(p);
  *out = std::move(a);
  return HMC_SUCCESS;
}

}  // namespace hmc

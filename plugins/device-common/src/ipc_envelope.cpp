#include "devplug/ipc_envelope.h"

#include <cstring>

#include "hmc/plugin/device.h"

namespace hmc::devplug {
namespace {

constexpr char kMagic[4] = {'H', 'M', 'C', 'I'};
constexpr uint8_t kVersion = 1;
constexpr size_t kNameLen = 8;

void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

bool ipc_envelope_write(const char* plugin, uint64_t alloc_size, const void* vendor,
                        size_t vendor_len, void* out, size_t out_cap, size_t* out_len) {
  size_t total = ipc_handle_size(vendor_len);
  if (vendor_len > 255 || total > HMC_DEVICE_IPC_HANDLE_MAX || total > out_cap) return false;
  auto* p = static_cast<uint8_t*>(out);
  std::memset(p, 0, kIpcEnvelopeHeader);
  std::memcpy(p, kMagic, sizeof kMagic);
  p[4] = kVersion;
  p[5] = static_cast<uint8_t>(vendor_len);
  for (size_t i = 0; i < kNameLen && plugin[i] != '\0'; ++i)
    p[8 + i] = static_cast<uint8_t>(plugin[i]);
  put_u64(p + 16, alloc_size);
  std::memcpy(p + kIpcEnvelopeHeader, vendor, vendor_len);
  *out_len = total;
  return true;
}

bool ipc_envelope_read(const char* plugin, const void* handle, size_t len,
                       size_t expected_vendor_len, IpcEnvelope* out, std::string* why) {
  const auto* p = static_cast<const uint8_t*>(handle);
  if (len < kIpcEnvelopeHeader || std::memcmp(p, kMagic, sizeof kMagic) != 0) {
    *why =
        "not an hmc device IPC handle (bad magic or too short: " + std::to_string(len) + " bytes)";
    return false;
  }
  if (p[4] != kVersion) {
    *why = "IPC handle of envelope version " + std::to_string(p[4]) + ", this plugin reads " +
           std::to_string(kVersion);
    return false;
  }
  char name[kNameLen + 1] = {};
  std::memcpy(name, p + 8, kNameLen);
  if (std::strncmp(name, plugin, kNameLen) != 0) {
    *why = std::string("IPC handle exported by the '") + name + "' plugin, not '" + plugin + "'";
    return false;
  }
  size_t vlen = p[5];
  if (vlen != expected_vendor_len || len < kIpcEnvelopeHeader + vlen) {
    *why = "IPC handle carries " + std::to_string(vlen) + " vendor bytes in " +
           std::to_string(len) + " bytes; expected " + std::to_string(expected_vendor_len);
    return false;
  }
  out->alloc_size = get_u64(p + 16);
  out->vendor = p + kIpcEnvelopeHeader;
  out->vendor_len = vlen;
  return true;
}

}  // namespace hmc::devplug

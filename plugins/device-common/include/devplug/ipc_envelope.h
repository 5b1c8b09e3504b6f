// The IPC handle a device plugin hands out: the vendor's own handle (64 bytes for CUDA, HIP and
// MUSA, 8 for CNRT) inside a small envelope that names the plugin and carries the allocation's
// size, so that ipc_open can refuse a handle of another plugin or a corrupted one with a clear
// message, and ptr_query can answer base and size for the mapping.
//
// Layout (little-endian, 24 bytes + vendor bytes, at most HMC_DEVICE_IPC_HANDLE_MAX):
//   0  char[4]  magic "HMCI"
//   4  uint8    envelope version (1)
//   5  uint8    vendor handle length
//   6  uint16   reserved (0)
//   8  char[8]  plugin name, NUL-padded ("cuda")
//   16 uint64   size of the exported allocation
//   24 ...      vendor handle
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hmc::devplug {

constexpr size_t kIpcEnvelopeHeader = 24;

// Total handle size for a vendor handle of vendor_len bytes.
constexpr size_t ipc_handle_size(size_t vendor_len) {
  return kIpcEnvelopeHeader + vendor_len;
}

// Writes the envelope into out (capacity out_cap). False when it does not fit.
bool ipc_envelope_write(const char* plugin, uint64_t alloc_size, const void* vendor,
                        size_t vendor_len, void* out, size_t out_cap, size_t* out_len);

struct IpcEnvelope {
  uint64_t alloc_size = 0;
  const uint8_t* vendor = nullptr;  // points into the parsed buffer
  size_t vendor_len = 0;
};

// Parses and checks a handle made by ipc_envelope_write for this plugin, expecting a vendor
// handle of expected_vendor_len bytes. False with *why when it is not one.
bool ipc_envelope_read(const char* plugin, const void* handle, size_t len,
                       size_t expected_vendor_len, IpcEnvelope* out, std::string* why);

}  // namespace hmc::devplug

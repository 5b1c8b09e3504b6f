#include "framed/frame_header.h"

#include <cstring>

namespace hmc {
namespace {

constexpr uint32_t kHeaderMagic = 0x464d4348;  // "HCMF"
constexpr uint16_t kPiecesVersion = 1;
constexpr uint16_t kIpcVersion = 2;
constexpr uint16_t kSharedVersion = 3;
constexpr uint16_t kIpcSharedVersion = 4;
constexpr uint32_t kIpcFlagSharedToo = 1;          // version 4: shared bounces are offered as well
constexpr size_t kPluginNameMax = 16;              // NUL-padded, at byte 24 of versions 2 and 4
constexpr uint32_t kDescriptorMagic = 0x44534d48;  // "HMSD"

// Bytes 0..15 of every version: u32 magic, u16 version, u16 handle length (2 and 4), u64 total.
void put_common(uint8_t* out, uint16_t version, uint16_t handle_len, uint64_t total) {
  std::memcpy(out, &kHeaderMagic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &handle_len, 2);
  std::memcpy(out + 8, &total, 8);
}

// Versions 2 and 4: u64 offset at 16, the plugin name at 24, (4) u32 flags and u32 0 at 40,
// the handle at 40 (2) or 48 (4).
bool decode_ipc(const uint8_t* in, size_t got, uint16_t version, uint64_t first, Header* h) {
  uint16_t handle_len;
  std::memcpy(&handle_len, in + 6, 2);
  if (got < kIpcHeaderFixed) return false;
  const size_t fixed = version == kIpcSharedVersion ? kIpcSharedHeaderFixed : kIpcHeaderFixed;
  if (h->total < first || handle_len == 0 || handle_len > HMC_DEVICE_IPC_HANDLE_MAX ||
      got != fixed + handle_len || in[24 + kPluginNameMax - 1] != 0)
    return false;
  uint32_t flags = 0;
  if (version == kIpcSharedVersion) std::memcpy(&flags, in + kIpcHeaderFixed, 4);
  std::memcpy(&h->ipc.offset, in + 16, 8);
  h->ipc.plugin.assign(reinterpret_cast<const char*>(in + 24));
  h->ipc.handle.assign(in + fixed, in + fixed + handle_len);
  h->ipc.shared_too = (flags & kIpcFlagSharedToo) != 0;
  return true;
}

}  // namespace

size_t encode_pieces_header(uint8_t* out, uint64_t total) {
  put_common(out, kPiecesVersion, 0, total);
  return kPiecesHeaderSize;
}

size_t encode_ipc_header(uint8_t* out, uint64_t total, const IpcExport& ex) {
  const uint16_t version = ex.shared_too ? kIpcSharedVersion : kIpcVersion;
  const size_t fixed = ex.shared_too ? kIpcSharedHeaderFixed : kIpcHeaderFixed;
  std::memset(out, 0, fixed);
  put_common(out, version, static_cast<uint16_t>(ex.handle.size()), total);
  std::memcpy(out + 16, &ex.offset, 8);
  std::memcpy(out + 24, ex.plugin.data(), std::min(ex.plugin.size(), kPluginNameMax - 1));
  if (ex.shared_too) std::memcpy(out + kIpcHeaderFixed, &kIpcFlagSharedToo, 4);
  std::memcpy(out + fixed, ex.handle.data(), ex.handle.size());
  return fixed + ex.handle.size();
}

// Version 3: u32 the sender's pid at 16, u32 0.
size_t encode_shared_header(uint8_t* out, uint64_t total, uint32_t pid) {
  std::memset(out, 0, kSharedHeaderSize);
  put_common(out, kSharedVersion, 0, total);
  std::memcpy(out + 16, &pid, 4);
  return kSharedHeaderSize;
}

bool decode_header(const uint8_t* in, size_t got, uint64_t first, Header* h) {
  if (got < kPiecesHeaderSize) return false;
  uint32_t magic;
  uint16_t version;
  std::memcpy(&magic, in, 4);
  std::memcpy(&version, in + 4, 2);
  std::memcpy(&h->total, in + 8, 8);
  if (magic != kHeaderMagic) return false;
  switch (version) {
    case kPiecesVersion:
      h->kind = HeaderKind::Pieces;
      return got == kPiecesHeaderSize && h->total >= first;
    case kSharedVersion:
      h->kind = HeaderKind::Shared;
      return got == kSharedHeaderSize && h->total >= first;
    case kIpcVersion:
    case kIpcSharedVersion:
      h->kind = HeaderKind::Ipc;
      return decode_ipc(in, got, version, first, h);
  }
  return false;
}

// u32 magic, i32 slab fd, u64 slab bytes, u64 offset of the buffer in the slab, u64 length.
void encode_descriptor(uint8_t* out, const PieceDescriptor& d) {
  std::memcpy(out, &kDescriptorMagic, 4);
  std::memcpy(out + 4, &d.fd, 4);
  std::memcpy(out + 8, &d.slab_bytes, 8);
  std::memcpy(out + 16, &d.offset, 8);
  std::memcpy(out + 24, &d.len, 8);
}

bool decode_descriptor(const uint8_t* in, size_t got, PieceDescriptor* d) {
  uint32_t magic;
  if (got != kDescriptorSize) return false;
  std::memcpy(&magic, in, 4);
  std::memcpy(&d->fd, in + 4, 4);
  std::memcpy(&d->slab_bytes, in + 8, 8);
  std::memcpy(&d->offset, in + 16, 8);
  std::memcpy(&d->len, in + 24, 8);
  return magic == kDescriptorMagic &&
         (d->len == 0 || (d->offset <= d->slab_bytes && d->len <= d->slab_bytes - d->offset));
}

void encode_reply(uint8_t* out, uint32_t code) {
  std::memcpy(out, &code, 4);
  std::memset(out + 4, 0, 4);
}

uint32_t decode_reply(const uint8_t* in) {
  uint32_t code;
  std::memcpy(&code, in, 4);
  return code;
}

}  // namespace hmc

#include "wire.h"

#include <cstring>

namespace hmc::ofi {
namespace {

constexpr uint32_t kHandleMagic = 0x3149464f;  // "OFI1"
constexpr uint32_t kHelloMagic = 0x4849464f;   // "OFIH"
constexpr uint32_t kAckMagic = 0x4149464f;     // "OFIA"
constexpr uint32_t kRkeyMagic = 0x4b49464f;    // "OFIK"
constexpr uint32_t kFinMagic = 0x4649464f;     // "OFIF"
constexpr uint32_t kCtsMagic = 0x4349464f;     // "OFIC"
constexpr uint8_t kMsgMagic = 0x4d;            // 'M'

void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
// 2: tags carry the slot as an XOR key and data messages the slot they were sent to (wire.h).
constexpr uint8_t kVersion = 2;

// The head of a FIN or CTS (size bytes): its magic, the version and a status byte; the rest
// of the message is zeroed, then filled by the caller.
void put_answer_head(uint8_t* out, size_t size, uint32_t magic, uint8_t status) {
  std::memset(out, 0, size);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(magic >> (8 * i));
  out[4] = kVersion;
  out[5] = status;
}
// Whether p, n bytes, is size bytes long and starts with that head.
bool answer_head_ok(const uint8_t* p, size_t n, size_t size, uint32_t magic) {
  if (n != size) return false;
  uint32_t m = 0;
  for (int i = 0; i < 4; ++i) m |= static_cast<uint32_t>(p[i]) << (8 * i);
  return m == magic && p[4] == kVersion;
}

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i)
      b[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
    out_->insert(out_->end(), b, b + sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }

 private:
  std::vector<uint8_t>* out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  bool get(T* v) {
    if (n_ - off_ < sizeof(T) || off_ > n_) return false;
    uint64_t r = 0;
    for (size_t i = 0; i < sizeof(T); ++i) r |= static_cast<uint64_t>(p_[off_ + i]) << (8 * i);
    *v = static_cast<T>(r);
    off_ += sizeof(T);
    return true;
  }
  bool bytes(void* dst, size_t n) {
    if (n_ - off_ < n) return false;
    std::memcpy(dst, p_ + off_, n);
    off_ += n;
    return true;
  }
  size_t left() const { return n_ - off_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
};

size_t copy_out(const std::vector<uint8_t>& v, uint8_t* out, size_t cap) {
  if (v.size() > cap) return 0;
  std::memcpy(out, v.data(), v.size());
  return v.size();
}

}  // namespace

void encode_eager_header(uint8_t* out, uint64_t len, uint8_t slot) {
  std::memset(out, 0, kMsgHeader);
  out[0] = kMsgMagic;
  out[1] = kVersion;
  out[2] = static_cast<uint8_t>(MsgType::kEager);
  out[3] = slot;
  put_u64(out + 8, len);
}

void encode_rts(uint8_t* out, const MsgHeader& h) {
  std::memset(out, 0, kRtsSize);
  out[0] = kMsgMagic;
  out[1] = kVersion;
  out[2] = static_cast<uint8_t>(h.type);
  out[3] = h.slot;
  put_u64(out + 8, h.len);
  put_u64(out + 16, h.raddr);
  put_u64(out + 24, h.key);
  put_u64(out + 32, h.cookie);
}

bool decode_msg(const uint8_t* p, size_t n, MsgHeader* h) {
  if (n < kMsgHeader || p[0] != kMsgMagic || p[1] != kVersion) return false;
  h->len = get_u64(p + 8);
  h->slot = p[3];
  if (p[2] == static_cast<uint8_t>(MsgType::kEager)) {
    h->type = MsgType::kEager;
    return n - kMsgHeader == h->len;
  }
  if ((p[2] != static_cast<uint8_t>(MsgType::kRtsRead) &&
       p[2] != static_cast<uint8_t>(MsgType::kRtsWrite)) ||
      n != kRtsSize)
    return false;
  h->type = static_cast<MsgType>(p[2]);
  h->raddr = get_u64(p + 16);
  h->key = get_u64(p + 24);
  h->cookie = get_u64(p + 32);
  return true;
}

void encode_fin(uint8_t* out, uint64_t cookie, uint8_t status) {
  put_answer_head(out, kFinSize, kFinMagic, status);
  put_u64(out + 8, cookie);
}

bool decode_fin(const uint8_t* p, size_t n, uint64_t* cookie, uint8_t* status) {
  if (!answer_head_ok(p, n, kFinSize, kFinMagic)) return false;
  *status = p[5];
  *cookie = get_u64(p + 8);
  return true;
}

void encode_cts(uint8_t* out, const Cts& c) {
  put_answer_head(out, kCtsSize, kCtsMagic, c.status);
  put_u64(out + 8, c.cookie);
  put_u64(out + 16, c.len);
  put_u64(out + 24, c.raddr);
  put_u64(out + 32, c.key);
}

bool decode_cts(const uint8_t* p, size_t n, Cts* c) {
  if (!answer_head_ok(p, n, kCtsSize, kCtsMagic)) return false;
  c->status = p[5];
  c->cookie = get_u64(p + 8);
  c->len = get_u64(p + 16);
  c->raddr = get_u64(p + 24);
  c->key = get_u64(p + 32);
  return true;
}

size_t encode_handle(const ConnHandle& h, uint8_t* out, size_t cap) {
  if (h.device.size() > kMaxDeviceName || h.addr.size() > kMaxAddr) return 0;
  std::vector<uint8_t> v;
  Writer w(&v);
  w.put<uint32_t>(kHandleMagic);
  w.put<uint8_t>(kVersion);
  w.put<uint8_t>(static_cast<uint8_t>(h.device.size()));
  w.put<uint16_t>(static_cast<uint16_t>(h.addr.size()));
  w.put<uint64_t>(h.listener_id);
  w.bytes(h.device.data(), h.device.size());
  w.bytes(h.addr.data(), h.addr.size());
  return copy_out(v, out, cap);
}

bool decode_handle(const uint8_t* p, size_t len, ConnHandle* h, std::string* why) {
  Reader r(p, len);
  uint32_t magic = 0;
  uint8_t version = 0, name_len = 0;
  uint16_t addr_len = 0;
  if (!r.get(&magic) || magic != kHandleMagic) return *why = "not an ofi connection handle", false;
  if (!r.get(&version) || version != kVersion)
    return *why = "protocol version " + std::to_string(version) + ", this plugin speaks " +
                  std::to_string(kVersion),
           false;
  if (!r.get(&name_len) || !r.get(&addr_len) || !r.get(&h->listener_id))
    return *why = "truncated header", false;
  if (name_len > kMaxDeviceName || addr_len > kMaxAddr || addr_len == 0)
    return *why = "device name or address length out of range", false;
  h->device.resize(name_len);
  h->addr.resize(addr_len);
  if (!r.bytes(&h->device[0], name_len) || !r.bytes(h->addr.data(), addr_len))
    return *why = "truncated (" + std::to_string(len) + " bytes)", false;
  if (r.left() != 0) return *why = "trailing bytes", false;
  return true;
}

std::vector<uint8_t> encode_hello(const Hello& h) {
  std::vector<uint8_t> v;
  Writer w(&v);
  w.put<uint32_t>(kHelloMagic);
  w.put<uint8_t>(kVersion);
  w.put<uint8_t>(h.slot);
  w.put<uint16_t>(static_cast<uint16_t>(h.addr.size()));
  w.put<uint64_t>(h.listener_id);
  w.put<uint64_t>(h.nonce);
  w.put<uint64_t>(h.probe_addr);
  w.put<uint64_t>(h.probe_key);
  w.bytes(h.addr.data(), h.addr.size());
  return v;
}

bool decode_hello(const uint8_t* p, size_t len, Hello* h) {
  Reader r(p, len);
  uint32_t magic = 0;
  uint8_t version = 0;
  uint16_t addr_len = 0;
  if (!r.get(&magic) || magic != kHelloMagic || !r.get(&version) || version != kVersion)
    return false;
  if (!r.get(&h->slot) || !r.get(&addr_len) || !r.get(&h->listener_id) || !r.get(&h->nonce) ||
      !r.get(&h->probe_addr) || !r.get(&h->probe_key))
    return false;
  if (addr_len == 0 || addr_len > kMaxAddr || h->slot >= kDataSlots) return false;
  h->addr.resize(addr_len);
  return r.bytes(h->addr.data(), addr_len) && r.left() == 0;
}

std::vector<uint8_t> encode_ack(const Ack& a) {
  std::vector<uint8_t> v;
  Writer w(&v);
  w.put<uint32_t>(kAckMagic);
  w.put<uint8_t>(kVersion);
  w.put<uint8_t>(a.slot);
  w.put<uint8_t>(static_cast<uint8_t>(a.status));
  w.put<uint8_t>(0);
  w.put<uint64_t>(a.listener_id);
  w.put<uint64_t>(a.nonce);
  w.put<uint64_t>(a.probe_addr);
  w.put<uint64_t>(a.probe_key);
  return v;
}

bool decode_ack(const uint8_t* p, size_t len, Ack* a) {
  Reader r(p, len);
  uint32_t magic = 0;
  uint8_t version = 0, status = 0, pad = 0;
  if (!r.get(&magic) || magic != kAckMagic || !r.get(&version) || version != kVersion) return false;
  if (!r.get(&a->slot) || !r.get(&status) || !r.get(&pad) || !r.get(&a->listener_id) ||
      !r.get(&a->nonce) || !r.get(&a->probe_addr) || !r.get(&a->probe_key) || r.left() != 0)
    return false;
  if (status > static_cast<uint8_t>(AckStatus::kBusy)) return false;
  if (status == 0 && a->slot >= kDataSlots) return false;
  a->status = static_cast<AckStatus>(status);
  return true;
}

size_t encode_rkey(const PackedRkey& k, uint8_t* out, size_t cap) {
  if (k.entries.size() > 255) return 0;
  std::vector<uint8_t> v;
  Writer w(&v);
  w.put<uint32_t>(kRkeyMagic);
  w.put<uint8_t>(kVersion);
  w.put<uint8_t>(static_cast<uint8_t>(k.entries.size()));
  w.put<uint8_t>(static_cast<uint8_t>(k.access));
  w.put<uint8_t>(0);
  w.put<uint64_t>(k.base);
  w.put<uint64_t>(k.size);
  for (const RkeyEntry& e : k.entries) {
    if (e.device.size() > kMaxDeviceName) return 0;
    char name[16] = {};
    std::memcpy(name, e.device.data(), e.device.size());
    w.bytes(name, sizeof(name));
    w.put<uint64_t>(e.key);
    w.put<uint8_t>(static_cast<uint8_t>((e.virt_addr ? 1u : 0u) | (e.readable ? 2u : 0u)));
    for (int i = 0; i < 7; ++i) w.put<uint8_t>(0);
  }
  return copy_out(v, out, cap);
}

bool decode_rkey(const uint8_t* p, size_t len, PackedRkey* k, std::string* why) {
  Reader r(p, len);
  uint32_t magic = 0;
  uint8_t version = 0, count = 0, access = 0, pad = 0;
  if (!r.get(&magic) || magic != kRkeyMagic) return *why = "not an ofi remote key", false;
  if (!r.get(&version) || version != kVersion)
    return *why = "remote key version " + std::to_string(version) + ", this plugin reads " +
                  std::to_string(kVersion),
           false;
  if (!r.get(&count) || !r.get(&access) || !r.get(&pad) || !r.get(&k->base) || !r.get(&k->size))
    return *why = "truncated header", false;
  if (r.left() != static_cast<size_t>(count) * kRkeyEntry)
    return *why = "length " + std::to_string(len) + " does not match " + std::to_string(count) +
                  " entries",
           false;
  if (k->size > UINT64_MAX - k->base) return *why = "region wraps around the address space", false;
  k->access = access;
  k->entries.clear();
  for (uint8_t i = 0; i < count; ++i) {
    char name[17] = {};
    RkeyEntry e;
    uint8_t flags = 0, skip = 0;
    r.bytes(name, 16);
    r.get(&e.key);
    r.get(&flags);
    for (int j = 0; j < 7; ++j) r.get(&skip);
    e.device = name;
    e.virt_addr = (flags & 1u) != 0;
    e.readable = (flags & 2u) != 0;
    k->entries.push_back(std::move(e));
  }
  return true;
}

}  // namespace hmc::ofi

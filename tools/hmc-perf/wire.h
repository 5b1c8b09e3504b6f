// The messages hmc-perf's two processes exchange on its reserved control tag, and the tags of
// the data messages. Pure code (encode/decode), so the unit test can include it.
//
// Sequence (client = the side that measures, server = the side that follows):
//   client -> server  Setup   (test, op, check, server's memory, the per-size plan, and the
//                              client's region descriptor for put latency)
//   server -> client  Reply   (ok or an error text, and the server's region descriptor)
//   per size:  client -> Begin(idx);  server prepares (posts receives, fills get slots) -> Ready
//              the timed loop;  get bw only: client -> Fin;  server -> Result (check outcome)
//   client -> End;  server -> Bye;  both close.
// Fields are fixed-width and little-endian (the byte order of every host hmc runs on today);
// the magic and version reject a mismatched or foreign peer.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "options.h"

namespace hmc::perf {

// Tags: user tags must stay below HMC_TAG_MAX (2^59). The control tag is reserved by the tool;
// data messages use one tag per iteration, so matching never depends on message order.
constexpr uint64_t kControlTag = 0xFFFF0000ull;
constexpr uint64_t kDataTagBase = 1ull << 32;  // + iteration
constexpr uint64_t kAckTagBase = 2ull << 32;   // + iteration (put bw --check: slot may be reused)
constexpr uint32_t kMagic = 0x50434d48;        // "HMCP"
constexpr uint16_t kWireVersion = 1;
constexpr size_t kControlMax = 64 * 1024;  // receive buffer of control messages

enum class MsgType : uint16_t { Setup = 1, Reply, Begin, Ready, Fin, Result, End, Bye };

struct Setup {
  Test test = Test::Bw;
  Op op = Op::Send;
  bool check = false;
  std::string peer_mem;  // the server's buffers
  std::vector<SizePlan> plan;
  std::vector<uint8_t> client_desc;  // put lat: the client's region
};

struct Reply {
  int32_t status = 0;  // 0 ok, else an hmc_status_t and error text
  std::string error;
  std::string path;  // the server's view of the path (for cross-checking in the output)
  std::vector<uint8_t> server_desc;
};

// Begin/Ready/Fin/Result/End/Bye.
struct Control {
  MsgType type = MsgType::Begin;
  uint32_t index = 0;          // size index
  int32_t status = 0;          // Result: 0 ok, 1 check mismatch, else an hmc_status_t
  uint64_t bad_iteration = 0;  // Result with a mismatch
  uint64_t bad_offset = 0;
  std::string text;  // Result: what went wrong
};

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void bytes(const std::vector<uint8_t>& b) {
    u32(static_cast<uint32_t>(b.size()));
    buf_.insert(buf_.end(), b.begin(), b.end());
  }
  void str(const std::string& s) { bytes(std::vector<uint8_t>(s.begin(), s.end())); }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  void raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool u8(uint8_t* v) { return raw(v, 1); }
  bool u16(uint16_t* v) { return raw(v, 2); }
  bool u32(uint32_t* v) { return raw(v, 4); }
  bool i32(int32_t* v) { return raw(v, 4); }
  bool u64(uint64_t* v) { return raw(v, 8); }
  bool bytes(std::vector<uint8_t>* b, size_t max) {
    uint32_t len = 0;
    if (!u32(&len) || len > max || len > n_ - off_) return false;
    b->assign(p_ + off_, p_ + off_ + len);
    off_ += len;
    return true;
  }
  bool str(std::string* s, size_t max) {
    std::vector<uint8_t> b;
    if (!bytes(&b, max)) return false;
    s->assign(b.begin(), b.end());
    return true;
  }
  bool at_end() const { return off_ == n_; }

 private:
  bool raw(void* v, size_t n) {
    if (n > n_ - off_) return false;
    std::memcpy(v, p_ + off_, n);
    off_ += n;
    return true;
  }
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
};

inline void put_header(Writer& w, MsgType t) {
  w.u32(kMagic);
  w.u16(kWireVersion);
  w.u16(static_cast<uint16_t>(t));
}

// Reads the header; on failure *err says what is wrong with the message.
inline bool get_header(Reader& r, MsgType want, std::string* err) {
  uint32_t magic = 0;
  uint16_t version = 0, type = 0;
  if (!r.u32(&magic) || !r.u16(&version) || !r.u16(&type)) {
    *err = "short control message";
    return false;
  }
  if (magic != kMagic) {
    *err = "control message without the hmc-perf magic (is the peer hmc-perf?)";
    return false;
  }
  if (version != kWireVersion) {
    *err = "peer speaks hmc-perf protocol version " + std::to_string(version) + ", this one " +
           std::to_string(kWireVersion) + ": use the same hmc-perf on both sides";
    return false;
  }
  if (type != static_cast<uint16_t>(want)) {
    *err = "expected control message " + std::to_string(static_cast<int>(want)) + ", got " +
           std::to_string(type);
    return false;
  }
  return true;
}

inline std::vector<uint8_t> encode(const Setup& s) {
  Writer w;
  put_header(w, MsgType::Setup);
  w.u8(static_cast<uint8_t>(s.test));
  w.u8(static_cast<uint8_t>(s.op));
  w.u8(s.check ? 1 : 0);
  w.str(s.peer_mem);
  w.u32(static_cast<uint32_t>(s.plan.size()));
  for (const auto& p : s.plan) {
    w.u64(p.size);
    w.u64(static_cast<uint64_t>(p.iters));
    w.u64(static_cast<uint64_t>(p.warmup));
    w.u64(static_cast<uint64_t>(p.window));
  }
  w.bytes(s.client_desc);
  return w.take();
}

inline bool decode(const uint8_t* p, size_t n, Setup* s, std::string* err) {
  Reader r(p, n);
  if (!get_header(r, MsgType::Setup, err)) return false;
  uint8_t test = 0, op = 0, check = 0;
  uint32_t count = 0;
  if (!r.u8(&test) || !r.u8(&op) || !r.u8(&check) || !r.str(&s->peer_mem, 31) || !r.u32(&count) ||
      test > 1 || op > 2 || count == 0 || count > kMaxSizes) {
    *err = "malformed setup message";
    return false;
  }
  s->test = static_cast<Test>(test);
  s->op = static_cast<Op>(op);
  s->check = check != 0;
  s->plan.clear();
  for (uint32_t i = 0; i < count; ++i) {
    SizePlan sp;
    uint64_t iters = 0, warmup = 0, window = 0;
    if (!r.u64(&sp.size) || !r.u64(&iters) || !r.u64(&warmup) || !r.u64(&window) || sp.size == 0 ||
        iters == 0 || iters > INT32_MAX || warmup > INT32_MAX || window == 0 ||
        window > static_cast<uint64_t>(kMaxWindow)) {
      *err = "malformed size plan in setup message";
      return false;
    }
    sp.iters = static_cast<int64_t>(iters);
    sp.warmup = static_cast<int64_t>(warmup);
    sp.window = static_cast<int64_t>(window);
    s->plan.push_back(sp);
  }
  if (!r.bytes(&s->client_desc, kControlMax) || !r.at_end()) {
    *err = "malformed region descriptor in setup message";
    return false;
  }
  return true;
}

inline std::vector<uint8_t> encode(const Reply& m) {
  Writer w;
  put_header(w, MsgType::Reply);
  w.i32(m.status);
  w.str(m.error.substr(0, 1024));
  w.str(m.path.substr(0, 256));
  w.bytes(m.server_desc);
  return w.take();
}

inline bool decode(const uint8_t* p, size_t n, Reply* m, std::string* err) {
  Reader r(p, n);
  if (!get_header(r, MsgType::Reply, err)) return false;
  if (!r.i32(&m->status) || !r.str(&m->error, 1024) || !r.str(&m->path, 256) ||
      !r.bytes(&m->server_desc, kControlMax) || !r.at_end()) {
    *err = "malformed setup reply";
    return false;
  }
  return true;
}

inline std::vector<uint8_t> encode(const Control& c) {
  Writer w;
  put_header(w, c.type);
  w.u32(c.index);
  w.i32(c.status);
  w.u64(c.bad_iteration);
  w.u64(c.bad_offset);
  w.str(c.text.substr(0, 1024));
  return w.take();
}

inline bool decode(const uint8_t* p, size_t n, MsgType want, Control* c, std::string* err) {
  Reader r(p, n);
  if (!get_header(r, want, err)) return false;
  c->type = want;
  if (!r.u32(&c->index) || !r.i32(&c->status) || !r.u64(&c->bad_iteration) ||
      !r.u64(&c->bad_offset) || !r.str(&c->text, 1024) || !r.at_end()) {
    *err = "malformed control message";
    return false;
  }
  return true;
}

// Hex of the address blob handed to the loopback child on its command line.
constexpr std::string_view kHexDigits = "0123456789abcdef";

inline std::string to_hex(const std::vector<uint8_t>& b) {
  std::string s;
  s.reserve(b.size() * 2);
  for (uint8_t c : b) {
    s.push_back(kHexDigits[c >> 4]);
    s.push_back(kHexDigits[c & 15]);
  }
  return s;
}

// The bytes of to_hex's text (upper case taken too). False, *out untouched, on an odd length or
// a character that is not a hex digit.
inline bool from_hex(const std::string& s, std::vector<uint8_t>* out) {
  if (s.size() % 2 != 0) return false;
  auto digit = [](char c) {
    return kHexDigits.find(static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c));
  };
  std::vector<uint8_t> bytes(s.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const size_t high = digit(s[2 * i]), low = digit(s[2 * i + 1]);
    if (high == std::string_view::npos || low == std::string_view::npos) return false;
    bytes[i] = static_cast<uint8_t>(high * 16 + low);
  }
  *out = std::move(bytes);
  return true;
}

}  // namespace hmc::perf

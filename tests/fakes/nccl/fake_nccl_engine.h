// The emulated NCCL engine (see fake_nccl.cpp for what it does and its FAKENCCL_* settings):
// communicators over shared memory, collectives as host work on the emulated runtime's streams.
// Included once by each emulated library's source, after it defined FAKENCCL_RUNTIME (the
// fakegpu emulator), FAKENCCL_MEMORY, FAKENCCL_WORD and FAKENCCL_EXPORT (the visibility of the
// nccl* functions below: default where they are the library's API, hidden where another API
// wraps them, as fake_cncl.cpp does).
#pragma once
// Its internals have internal linkage on purpose (one copy per library); GCC warns about that in
// a header.
#pragma GCC diagnostic ignored "-Wsubobject-linkage"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fakegpu.h"
#include "nccl_api.h"

using namespace hmc::vendor::nccl;
using fakegpu::Err;

namespace {

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get(FAKENCCL_RUNTIME);
}

long env_long(const char* name, long def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : def;
}

long timeout_ms() {
  return env_long("FAKENCCL_TIMEOUT_MS", 20000);
}

constexpr char kMagic[8] = {'F', 'A', 'K', 'E', 'N', 'C', 'C', 'L'};

struct IdWire {
  char magic[8];
  uint64_t key;
};
static_assert(sizeof(IdWire) <= kUniqueIdBytes);

// The communicator's shared header.
struct Shared {
  std::atomic<uint32_t> ready;  // 1 once the creator initialised the rest
  int32_t nranks;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int32_t joined;
  int32_t arrived;
  uint64_t generation;
  int32_t aborted;  // 1 + the rank that aborted or failed; 0 while healthy
  char why[200];
};

std::mutex g_error_mutex;
std::string g_last_error;  // of calls without a communicator

void set_global_error(const std::string& e) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  g_last_error = e;
}

std::atomic<long> g_ops{0};

size_t dtype_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
  }
  return 0;
}

bool valid_op(ncclRedOp_t op) {
  return op >= ncclSum && op <= ncclAvg;
}

// ---- element arithmetic ------------------------------------------------------------------------

// The bits of v read as a To (of the same size).
template <typename To, typename From>
To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  return bits_as<float>(bits);
}

uint16_t float_to_half(float f) {
  uint32_t x = bits_as<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = uint32_t(e) << 10 | man >> 13, rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent
  return uint16_t(sign | half);
}

float bf16_to_float(uint16_t b) {
  return bits_as<float>(uint32_t(b) << 16);
}

uint16_t float_to_bf16(float f) {
  uint32_t x = bits_as<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // NaN stays NaN
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

template <typename T>
T combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
    case ncclAvg:
      if constexpr (std::is_integral_v<T>)
        return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
      else
        return a + b;
    case ncclProd:
      if constexpr (std::is_integral_v<T>)
        return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
      else
        return a * b;
    case ncclMin: return b < a ? b : a;
    case ncclMax: return b > a ? b : a;
  }
  return a;
}

template <typename T>
void reduce_typed(char* acc, const char* in, size_t n, ncclRedOp_t op) {
  for (size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    std::memcpy(&b, in + i * sizeof(T), sizeof(T));
    a = combine(a, b, op);
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

template <float (*To)(uint16_t), uint16_t (*From)(float)>
void reduce_16(char* acc, const char* in, size_t n, ncclRedOp_t op) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t a, b;
    std::memcpy(&a, acc + 2 * i, 2);
    std::memcpy(&b, in + 2 * i, 2);
    a = From(combine(To(a), To(b), op));
    std::memcpy(acc + 2 * i, &a, 2);
  }
}

// acc = acc op in, n elements.
void reduce(char* acc, const char* in, size_t n, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: return reduce_typed<int8_t>(acc, in, n, op);
    case ncclUint8: return reduce_typed<uint8_t>(acc, in, n, op);
    case ncclInt32: return reduce_typed<int32_t>(acc, in, n, op);
    case ncclUint32: return reduce_typed<uint32_t>(acc, in, n, op);
    case ncclInt64: return reduce_typed<int64_t>(acc, in, n, op);
    case ncclUint64: return reduce_typed<uint64_t>(acc, in, n, op);
    case ncclFloat32: return reduce_typed<float>(acc, in, n, op);
    case ncclFloat64: return reduce_typed<double>(acc, in, n, op);
    case ncclFloat16: return reduce_16<half_to_float, float_to_half>(acc, in, n, op);
    case ncclBfloat16: return reduce_16<bf16_to_float, float_to_bf16>(acc, in, n, op);
  }
}

template <typename T>
void divide_typed(char* acc, size_t n, int by) {
  for (size_t i = 0; i < n; ++i) {
    T a;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    a = T(a / T(by));
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

void divide(char* acc, size_t n, ncclDataType_t t, int by) {
  switch (t) {
    case ncclInt8: return divide_typed<int8_t>(acc, n, by);
    case ncclUint8: return divide_typed<uint8_t>(acc, n, by);
    case ncclInt32: return divide_typed<int32_t>(acc, n, by);
    case ncclUint32: return divide_typed<uint32_t>(acc, n, by);
    case ncclInt64: return divide_typed<int64_t>(acc, n, by);
    case ncclUint64: return divide_typed<uint64_t>(acc, n, by);
    case ncclFloat32: return divide_typed<float>(acc, n, by);
    case ncclFloat64: return divide_typed<double>(acc, n, by);
    case ncclFloat16:
    case ncclBfloat16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t a;
        std::memcpy(&a, acc + 2 * i, 2);
        bool h = t == ncclFloat16;
        float f = (h ? half_to_float(a) : bf16_to_float(a)) / float(by);
        a = h ? float_to_half(f) : float_to_bf16(f);
        std::memcpy(acc + 2 * i, &a, 2);
      }
      return;
  }
}

// ---- shared segments ---------------------------------------------------------------------------

// A segment this process mapped; unlinked on destruction when it created it.
class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() {
    if (addr_) munmap(addr_, map_len_);
    if (owner_) shm_unlink(name_.c_str());
  }
  bool create(const std::string& name, size_t len) {
    name_ = name;
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return false;
    owner_ = true;
    len_ = len;
    map_len_ = len ? len : 1;
    bool ok = ftruncate(fd, off_t(map_len_)) == 0;
    if (ok) addr_ = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (addr_ == MAP_FAILED) addr_ = nullptr;
    return ok && addr_;
  }
  bool open(const std::string& name) {
    name_ = name;
    int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
      close(fd);
      return false;
    }
    map_len_ = size_t(st.st_size);
    addr_ = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (addr_ == MAP_FAILED) addr_ = nullptr;
    return addr_ != nullptr;
  }
  // The created segment's name leaves the namespace (its mapping stays).
  void unlink_now() {
    if (owner_) shm_unlink(name_.c_str());
    owner_ = false;
  }
  char* data() const { return static_cast<char*>(addr_); }
  size_t mapped() const { return map_len_; }
  size_t length() const { return len_; }
  void set_length(size_t n) { len_ = n; }

 private:
  std::string name_;
  void* addr_ = nullptr;
  size_t len_ = 0, map_len_ = 0;
  bool owner_ = false;
};

// The length of a data segment is stored in its first 8 bytes.
constexpr size_t kDataHeader = 8;

timespec deadline_after(long ms) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

}  // namespace

// One rank's communicator.
struct hmc::vendor::nccl::ncclComm {
  uint64_t key = 0;
  int rank = 0, nranks = 0;
  std::unique_ptr<Segment> header = std::make_unique<Segment>();
  Shared* shared = nullptr;
  uint32_t next_seq = 0;
  std::mutex mutex;  // fields below
  std::condition_variable cv;
  int inflight = 0;
  ncclResult_t async = ncclSuccess;
  std::string last_error;
  bool aborted = false;

  void fail(ncclResult_t r, const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    if (async == ncclSuccess) async = r;
    last_error = why;
  }
  std::string prefix(uint32_t seq) const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/fakenccl-%016llx-%u", (unsigned long long)key, seq);
    return buf;
  }
};

namespace {

// Lock of the shared mutex; a rank that died holding it leaves the communicator aborted.
bool shared_lock(ncclComm* c) {
  int r = pthread_mutex_lock(&c->shared->mutex);
  if (r == EOWNERDEAD) {
    c->shared->aborted = c->shared->aborted ? c->shared->aborted : 1 + c->nranks;
    std::snprintf(c->shared->why, sizeof c->shared->why, "a rank died inside the library");
    pthread_mutex_consistent(&c->shared->mutex);
    pthread_cond_broadcast(&c->shared->cond);
    return true;
  }
  return r == 0;
}

void mark_aborted(ncclComm* c, const std::string& why) {
  if (!shared_lock(c)) return;
  if (!c->shared->aborted) {
    c->shared->aborted = 1 + c->rank;
    std::snprintf(c->shared->why, sizeof c->shared->why, "%s", why.c_str());
  }
  pthread_cond_broadcast(&c->shared->cond);
  pthread_mutex_unlock(&c->shared->mutex);
}

// Waits until every rank arrived. ncclSuccess, or an error with *why set.
ncclResult_t barrier(ncclComm* c, const char* where, std::string* why) {
  Shared* s = c->shared;
  if (!shared_lock(c)) {
    *why = FAKENCCL_WORD ": cannot lock the communicator";
    return ncclSystemError;
  }
  ncclResult_t result = ncclSuccess;
  if (s->aborted) {
    *why = std::string(FAKENCCL_WORD ": the communicator was aborted: ") + s->why;
    result = ncclRemoteError;
  } else if (++s->arrived == s->nranks) {
    s->arrived = 0;
    ++s->generation;
    pthread_cond_broadcast(&s->cond);
  } else {
    uint64_t gen = s->generation;
    timespec until = deadline_after(timeout_ms());
    while (s->generation == gen && !s->aborted) {
      int r = pthread_cond_timedwait(&s->cond, &s->mutex, &until);
      if (r == EOWNERDEAD) {
        pthread_mutex_consistent(&s->mutex);
        if (!s->aborted) s->aborted = 1 + s->nranks;
      }
      if (r == ETIMEDOUT && s->generation == gen && !s->aborted) {
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      FAKENCCL_WORD ": rank %d waited %ld ms at %s for the other ranks", c->rank,
                      timeout_ms(), where);
        *why = buf;
        s->aborted = 1 + c->rank;
        std::snprintf(s->why, sizeof s->why, "%s", buf);
        pthread_cond_broadcast(&s->cond);
        result = ncclSystemError;
        break;
      }
    }
    if (result == ncclSuccess && s->generation == gen) {
      *why = std::string(FAKENCCL_WORD ": the communicator was aborted: ") + s->why;
      result = ncclRemoteError;
    }
  }
  pthread_mutex_unlock(&s->mutex);
  return result;
}

// One part of a collective: what this rank contributes (a segment) and what it computes.
struct Part {
  bool is_send = false;
  int peer = -1;
  const void* src = nullptr;  // device memory this rank contributes
  size_t bytes = 0;
  void* dst = nullptr;  // device memory this rank fills
};

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast, SendRecv };

struct Work {
  Work() = default;
  // A collective's work: `k` over `n` elements of t, from s into r.
  Work(Kind k, const void* s, void* r, size_t n, ncclDataType_t t)
      : kind(k), send(s), recv(r), count(n), dtype(t) {}

  Kind kind = Kind::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  std::vector<Part> parts;  // SendRecv
  uint32_t seq = 0;
  bool inject_failure = false;
};

// Device memory [p, p+bytes) as the emulator keeps it.
Err view(const void* p, size_t bytes, std::shared_ptr<void>* hold, char** at) {
  if (bytes == 0) {
    *at = nullptr;
    return Err::Ok;
  }
  return emu().device_view(p, bytes, hold, at);
}

std::string seg_name(ncclComm* c, uint32_t seq, int from, int to, int k) {
  return c->prefix(seq) + "-" + std::to_string(from) + "-" + std::to_string(to) + "-" +
         std::to_string(k);
}

// Runs one collective on the stream's worker.
Err execute(ncclComm* c, const Work& w) {
  const size_t es = dtype_size(w.dtype);
  const int n = c->nranks, me = c->rank;
  std::string why;
  auto failed = [&](ncclResult_t r, const std::string& text) {
    c->fail(r, text);
    mark_aborted(c, text);
    return Err::CopyFailed;
  };
  if (w.inject_failure)
    return failed(ncclSystemError, FAKENCCL_WORD ": injected failure (FAKENCCL_FAIL_OP_NTH)");

  // 1. What this rank contributes: one segment per (destination, k). -1 means every rank.
  struct Out {
    int to;
    int k;
    const void* src;
    size_t bytes;
  };
  std::vector<Out> outs;
  switch (w.kind) {
    case Kind::AllReduce:
    case Kind::AllGather: outs.push_back({-1, 0, w.send, w.count * es}); break;
    case Kind::ReduceScatter: outs.push_back({-1, 0, w.send, w.count * es * size_t(n)}); break;
    case Kind::Broadcast:
      if (me == w.root) outs.push_back({-1, 0, w.send, w.count * es});
      break;
    case Kind::SendRecv: {
      std::vector<int> sent(size_t(n), 0);
      for (const Part& p : w.parts)
        if (p.is_send) outs.push_back({p.peer, sent[size_t(p.peer)]++, p.src, p.bytes});
      break;
    }
  }
  std::vector<std::unique_ptr<Segment>> mine;
  for (const Out& o : outs) {
    auto seg = std::make_unique<Segment>();
    if (!seg->create(seg_name(c, w.seq, me, o.to, o.k), kDataHeader + o.bytes))
      return failed(ncclSystemError, std::string(FAKENCCL_WORD ": shm_open: ") + strerror(errno));
    uint64_t len = o.bytes;
    std::memcpy(seg->data(), &len, 8);
    std::shared_ptr<void> hold;
    char* at = nullptr;
    if (view(o.src, o.bytes, &hold, &at) != Err::Ok)
      return failed(ncclInvalidArgument,
                    FAKENCCL_WORD ": a send buffer is not " FAKENCCL_MEMORY " device memory");
    if (o.bytes) std::memcpy(seg->data() + kDataHeader, at, o.bytes);
    mine.push_back(std::move(seg));
  }
  if (ncclResult_t r = barrier(c, "the contribution barrier", &why); r != ncclSuccess)
    return failed(r, why);

  // 2. What this rank computes.
  auto open_from = [&](int from, int to, int k, Segment* seg) {
    return seg->open(seg_name(c, w.seq, from, to, k));
  };
  std::string problem;
  ncclResult_t problem_code = ncclSystemError;
  std::shared_ptr<void> hold;
  char* out = nullptr;
  switch (w.kind) {
    case Kind::AllReduce:
    case Kind::ReduceScatter: {
      size_t bytes = w.count * es;
      if (view(w.recv, bytes, &hold, &out) != Err::Ok) {
        problem = FAKENCCL_WORD ": the receive buffer is not " FAKENCCL_MEMORY " device memory";
        break;
      }
      std::vector<char> acc(bytes);
      size_t offset = w.kind == Kind::ReduceScatter ? size_t(me) * bytes : 0;
      for (int r = 0; r < n && problem.empty(); ++r) {
        Segment seg;
        if (!open_from(r, -1, 0, &seg)) {
          problem = FAKENCCL_WORD ": rank " + std::to_string(r) + "'s contribution is missing";
          break;
        }
        const char* in = seg.data() + kDataHeader + offset;
        if (r == 0)
          std::memcpy(acc.data(), in, bytes);
        else
          reduce(acc.data(), in, w.count, w.dtype, w.op);
      }
      if (problem.empty()) {
        if (w.op == ncclAvg) divide(acc.data(), w.count, w.dtype, n);
        if (bytes) std::memcpy(out, acc.data(), bytes);
      }
      break;
    }
    case Kind::AllGather: {
      size_t bytes = w.count * es;
      if (view(w.recv, bytes * size_t(n), &hold, &out) != Err::Ok) {
        problem = FAKENCCL_WORD ": the receive buffer is not " FAKENCCL_MEMORY " device memory";
        break;
      }
      for (int r = 0; r < n && problem.empty(); ++r) {
        Segment seg;
        if (!open_from(r, -1, 0, &seg))
          problem = FAKENCCL_WORD ": rank " + std::to_string(r) + "'s contribution is missing";
        else if (bytes)
          std::memcpy(out + size_t(r) * bytes, seg.data() + kDataHeader, bytes);
      }
      break;
    }
    case Kind::Broadcast: {
      size_t bytes = w.count * es;
      Segment seg;
      if (view(w.recv, bytes, &hold, &out) != Err::Ok)
        problem = FAKENCCL_WORD ": the receive buffer is not " FAKENCCL_MEMORY " device memory";
      else if (!open_from(w.root, -1, 0, &seg))
        problem = FAKENCCL_WORD ": the root's data is missing";
      else if (bytes)
        std::memcpy(out, seg.data() + kDataHeader, bytes);
      break;
    }
    case Kind::SendRecv: {
      std::vector<int> got(size_t(n), 0);
      for (const Part& p : w.parts) {
        if (p.is_send) continue;
        Segment seg;
        int k = got[size_t(p.peer)]++;
        if (!open_from(p.peer, me, k, &seg)) {
          problem = FAKENCCL_WORD ": rank " + std::to_string(me) + " posted a receive from rank " +
                    std::to_string(p.peer) + " that sent nothing";
          problem_code = ncclInvalidUsage;
          break;
        }
        uint64_t len = 0;
        std::memcpy(&len, seg.data(), 8);
        if (len != p.bytes) {
          problem = FAKENCCL_WORD ": rank " + std::to_string(p.peer) + " sent " +
                    std::to_string(len) + " bytes to rank " + std::to_string(me) +
                    ", which receives " + std::to_string(p.bytes);
          problem_code = ncclInvalidUsage;
          break;
        }
        std::shared_ptr<void> h;
        char* at = nullptr;
        if (view(p.dst, p.bytes, &h, &at) != Err::Ok) {
          problem = FAKENCCL_WORD ": a receive buffer is not " FAKENCCL_MEMORY " device memory";
          break;
        }
        if (p.bytes) std::memcpy(at, seg.data() + kDataHeader, p.bytes);
      }
      break;
    }
  }
  if (!problem.empty()) return failed(problem_code, problem);
  // 3. Nobody removes a segment another rank may still read.
  if (ncclResult_t r = barrier(c, "the completion barrier", &why); r != ncclSuccess)
    return failed(r, why);
  return Err::Ok;
}

bool device_memory(const void* p, size_t bytes) {
  if (bytes == 0) return true;
  std::shared_ptr<void> hold;
  char* at = nullptr;
  return emu().device_view(p, bytes, &hold, &at) == Err::Ok;
}

ncclResult_t refuse(ncclComm* c, ncclResult_t r, const std::string& why) {
  if (c) {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->last_error = why;
  }
  set_global_error(why);
  return r;
}

ncclResult_t submit(ncclComm* c, cudaStream_t stream, Work w) {
  if (!c) return refuse(nullptr, ncclInvalidArgument, FAKENCCL_WORD ": NULL communicator");
  if (!stream)
    return refuse(c, ncclInvalidArgument, FAKENCCL_WORD ": a NULL stream is not emulated");
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    if (c->aborted) {
      c->last_error = FAKENCCL_WORD ": the communicator was aborted";
      return ncclInvalidUsage;
    }
    ++c->inflight;
  }
  w.seq = c->next_seq++;
  long nth = env_long("FAKENCCL_FAIL_OP_NTH", 0);
  w.inject_failure = nth > 0 && ++g_ops == nth;
  auto* s = reinterpret_cast<fakegpu::Stream*>(stream);
  Err e = emu().launch_host(emu().stream_device(s), s, [c, w]() {
    Err r = execute(c, w);
    std::lock_guard<std::mutex> lock(c->mutex);
    --c->inflight;
    c->cv.notify_all();
    return r;
  });
  if (e != Err::Ok) {
    std::lock_guard<std::mutex> lock(c->mutex);
    --c->inflight;
    c->last_error =
        std::string(FAKENCCL_WORD ": cannot queue on the stream: ") + fakegpu::err_name(e);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

struct PendingP2P {
  ncclComm* comm;
  cudaStream_t stream;
  Part part;
};
thread_local int t_group_depth = 0;
thread_local std::vector<PendingP2P> t_group;

ncclResult_t flush_group() {
  std::vector<PendingP2P> parts;
  parts.swap(t_group);
  ncclResult_t result = ncclSuccess;
  // One collective per (communicator, stream), in the order they first appear.
  std::vector<bool> taken(parts.size(), false);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (taken[i]) continue;
    Work w;
    w.kind = Kind::SendRecv;
    w.dtype = ncclUint8;
    for (size_t j = i; j < parts.size(); ++j)
      if (!taken[j] && parts[j].comm == parts[i].comm && parts[j].stream == parts[i].stream) {
        taken[j] = true;
        w.parts.push_back(parts[j].part);
      }
    ncclResult_t r = submit(parts[i].comm, parts[i].stream, std::move(w));
    if (r != ncclSuccess && result == ncclSuccess) result = r;
  }
  return result;
}

ncclResult_t p2p(bool is_send, const void* buf, size_t count, ncclDataType_t t, int peer,
                 ncclComm* c, cudaStream_t stream) {
  if (!c) return refuse(nullptr, ncclInvalidArgument, FAKENCCL_WORD ": NULL communicator");
  size_t es = dtype_size(t);
  if (es == 0) return refuse(c, ncclInvalidArgument, FAKENCCL_WORD ": unknown data type");
  if (peer < 0 || peer >= c->nranks)
    return refuse(c, ncclInvalidArgument, FAKENCCL_WORD ": peer outside the communicator");
  if (!device_memory(buf, count * es))
    return refuse(c, ncclInvalidArgument,
                  FAKENCCL_WORD ": the buffer is not " FAKENCCL_MEMORY " device memory");
  Part p;
  p.is_send = is_send;
  p.peer = peer;
  p.bytes = count * es;
  if (is_send)
    p.src = buf;
  else
    p.dst = const_cast<void*>(buf);
  t_group.push_back({c, stream, p});
  return t_group_depth == 0 ? flush_group() : ncclSuccess;
}

ncclResult_t collective(ncclComm* c, cudaStream_t stream, Work w, size_t send_elems,
                        size_t recv_elems, bool reduces) {
  if (!c) return refuse(nullptr, ncclInvalidArgument, FAKENCCL_WORD ": NULL communicator");
  if (t_group_depth > 0)
    return refuse(c, ncclInvalidUsage,
                  FAKENCCL_WORD ": collectives inside a group are not emulated");
  size_t es = dtype_size(w.dtype);
  if (es == 0) return refuse(c, ncclInvalidArgument, FAKENCCL_WORD ": unknown data type");
  if (reduces && !valid_op(w.op))
    return refuse(c, ncclInvalidArgument, FAKENCCL_WORD ": unknown reduction operation");
  bool send_read = w.kind != Kind::Broadcast || c->rank == w.root;
  if ((send_read && !device_memory(w.send, send_elems * es)) ||
      !device_memory(w.recv, recv_elems * es))
    return refuse(c, ncclInvalidArgument,
                  FAKENCCL_WORD ": a buffer is not " FAKENCCL_MEMORY " device memory");
  return submit(c, stream, std::move(w));
}

}  // namespace

extern "C" {

FAKENCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = int(env_long("FAKENCCL_VERSION", 22809));
  return ncclSuccess;
}

FAKENCCL_EXPORT const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

FAKENCCL_EXPORT const char* ncclGetLastError(ncclComm_t c) {
  static thread_local std::string copy;
  if (c) {
    std::lock_guard<std::mutex> lock(c->mutex);
    copy = c->last_error;
  } else {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    copy = g_last_error;
  }
  return copy.c_str();
}

FAKENCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  IdWire w{};
  std::memcpy(w.magic, kMagic, sizeof w.magic);
  if (getrandom(&w.key, sizeof w.key, 0) != ssize_t(sizeof w.key)) return ncclSystemError;
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, &w, sizeof w);
  return ncclSuccess;
}

FAKENCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id,
                                              int rank) {
  IdWire w;
  std::memcpy(&w, id.internal, sizeof w);
  if (!out || nranks < 1 || rank < 0 || rank >= nranks ||
      std::memcmp(w.magic, kMagic, sizeof kMagic) != 0)
    return refuse(nullptr, ncclInvalidArgument,
                  FAKENCCL_WORD ": bad arguments to ncclCommInitRank");
  if (env_long("FAKENCCL_FAIL_INIT", 0))
    return refuse(nullptr, ncclSystemError,
                  FAKENCCL_WORD ": injected init failure (FAKENCCL_FAIL_INIT)");
  auto c = std::make_unique<ncclComm>();
  c->key = w.key;
  c->rank = rank;
  c->nranks = nranks;
  char name[64];
  std::snprintf(name, sizeof name, "/fakenccl-%016llx", (unsigned long long)w.key);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms());
  if (c->header->create(name, sizeof(Shared))) {
    Shared* s = reinterpret_cast<Shared*>(c->header->data());
    s->nranks = nranks;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mutex, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    s->ready.store(1, std::memory_order_release);
  } else {
    // Another rank creates it: wait for the segment, then for its initialisation.
    while (!c->header->open(name) || c->header->mapped() < sizeof(Shared) ||
           reinterpret_cast<Shared*>(c->header->data())->ready.load(std::memory_order_acquire) !=
               1) {
      if (std::chrono::steady_clock::now() > until)
        return refuse(nullptr, ncclSystemError,
                      FAKENCCL_WORD ": ncclCommInitRank: rank " + std::to_string(rank) +
                          " found no communicator " + name + " within the timeout");
      c->header = std::make_unique<Segment>();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  c->shared = reinterpret_cast<Shared*>(c->header->data());
  if (c->shared->nranks != nranks)
    return refuse(nullptr, ncclInvalidArgument,
                  FAKENCCL_WORD ": ncclCommInitRank: nranks differs between ranks");
  std::string why;
  if (ncclResult_t r = barrier(c.get(), "ncclCommInitRank", &why); r != ncclSuccess)
    return refuse(nullptr, r, why);
  // Every rank has it mapped: the name can go, so nothing is left in /dev/shm.
  c->header->unlink_now();
  *out = c.release();
  return ncclSuccess;
}

FAKENCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* err) {
  if (!c || !err) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(c->mutex);
  *err = c->async;
  return ncclSuccess;
}

FAKENCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->aborted = true;
  }
  mark_aborted(c, "rank " + std::to_string(c->rank) + " called ncclCommAbort");
  // Queued work ends at its next barrier; wait for it so the communicator can go.
  std::unique_lock<std::mutex> lock(c->mutex);
  c->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms()), [&] { return c->inflight == 0; });
  bool drained = c->inflight == 0;
  lock.unlock();
  if (drained) delete c;  // else leaked: a stream worker still holds it
  return ncclSuccess;
}

FAKENCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclSuccess;
  std::unique_lock<std::mutex> lock(c->mutex);
  if (!c->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms()),
                      [&] { return c->inflight == 0; })) {
    c->last_error = FAKENCCL_WORD ": ncclCommDestroy: collectives still running";
    return ncclInvalidUsage;
  }
  lock.unlock();
  delete c;
  return ncclSuccess;
}

FAKENCCL_EXPORT ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count,
                                           ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                                           cudaStream_t stream) {
  Work w(Kind::AllReduce, send, recv, count, t);
  w.op = op;
  return collective(c, stream, std::move(w), count, count, true);
}

FAKENCCL_EXPORT ncclResult_t ncclAllGather(const void* send, void* recv, size_t count,
                                           ncclDataType_t t, ncclComm_t c, cudaStream_t stream) {
  Work w(Kind::AllGather, send, recv, count, t);
  return collective(c, stream, std::move(w), count, c ? count * size_t(c->nranks) : 0, false);
}

FAKENCCL_EXPORT ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count,
                                               ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                                               cudaStream_t stream) {
  Work w(Kind::ReduceScatter, send, recv, count, t);
  w.op = op;
  return collective(c, stream, std::move(w), c ? count * size_t(c->nranks) : 0, count, true);
}

FAKENCCL_EXPORT ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count,
                                           ncclDataType_t t, int root, ncclComm_t c,
                                           cudaStream_t stream) {
  if (c && (root < 0 || root >= c->nranks))
    return refuse(c, ncclInvalidArgument, FAKENCCL_WORD ": root outside the communicator");
  Work w(Kind::Broadcast, send, recv, count, t);
  w.root = root;
  return collective(c, stream, std::move(w), count, count, false);
}

FAKENCCL_EXPORT ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t t, int peer,
                                      ncclComm_t c, cudaStream_t stream) {
  return p2p(true, send, count, t, peer, c, stream);
}

FAKENCCL_EXPORT ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t t, int peer,
                                      ncclComm_t c, cudaStream_t stream) {
  return p2p(false, recv, count, t, peer, c, stream);
}

FAKENCCL_EXPORT ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

FAKENCCL_EXPORT ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0)
    return refuse(nullptr, ncclInvalidUsage, FAKENCCL_WORD ": ncclGroupEnd without ncclGroupStart");
  return --t_group_depth == 0 ? flush_group() : ncclSuccess;
}

}  // extern "C"

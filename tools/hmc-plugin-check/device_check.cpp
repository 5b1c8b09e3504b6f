#include "device_check.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "coll/reduce.h"
#include "coll/schedule.h"
#include "hmc/plugin/status.hpp"
#include "pattern.h"
#include "props_rules.h"
#include "rules.h"
#include "target.h"
#include "wait.h"

extern char** environ;

namespace hmc::check {
namespace {

using hmc::plugin::status_name;

constexpr size_t kAlloc = size_t{1} << 20;
constexpr size_t kOddOffset = 3, kOddSize = 4097;  // a copy that starts and ends unaligned

std::string to_hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

bool from_hex(const std::string& s, std::vector<unsigned char>* out) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (s.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = nibble(s[i]), lo = nibble(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<unsigned char>(hi * 16 + lo));
  }
  return true;
}

// A stream and an event of one device; copies are enqueued on the stream and waited for through
// the event, within the limit.
class Copier {
 public:
  Copier(const hmc_device_plugin_v1_t* t, hmc_device_ctx_t* ctx, const Waiter& wait)
      : t_(t), ctx_(ctx), wait_(wait) {}
  ~Copier() {
    if (event_ != nullptr) t_->event_destroy(event_);
    if (stream_ != nullptr) t_->stream_destroy(stream_);
  }
  Copier(const Copier&) = delete;
  Copier& operator=(const Copier&) = delete;

  // Creates the stream and the event; the failing slot's status otherwise, named in *what.
  int open(int dev, const char** what) {
    int st = t_->stream_create(ctx_, dev, &stream_);
    if (st != HMC_PLUGIN_SUCCESS) {
      stream_ = nullptr;
      *what = "stream_create";
      return st;
    }
    st = t_->event_create(ctx_, dev, &event_);
    if (st != HMC_PLUGIN_SUCCESS) {
      event_ = nullptr;
      *what = "event_create";
    }
    return st;
  }
  int copy(void* dst, const void* src, size_t n, hmc_copy_kind_t kind) {
    return t_->copy_async(stream_, dst, src, n, kind);
  }
  hmc_device_stream_t* stream() const { return stream_; }
  // Records the event after the copies enqueued so far and polls it. SUCCESS, the error it
  // answered, or IN_PROGRESS when it had not answered when the time was up.
  int finish() {
    int st = t_->event_record(event_, stream_);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    wait_.until([&] { return static_cast<int>(t_->event_query(event_)); }, [] {}, &st);
    return st;
  }

 private:
  const hmc_device_plugin_v1_t* t_;
  hmc_device_ctx_t* ctx_;
  const Waiter& wait_;
  hmc_device_stream_t* stream_ = nullptr;
  hmc_device_event_t* event_ = nullptr;
};

class DeviceCheck {
 public:
  DeviceCheck(const DeviceTarget& target, const DeviceOptions& options, Report& report)
      : t_(target.table),
        ctx_(target.ctx),
        target_(target),
        options_(options),
        wait_(options.timeout),
        r_(report) {}

  void run();

 private:
  bool devices();
  void contexts();
  void exercise(int dev);
  void copies(int dev, unsigned char* d1, unsigned char* d2);
  void reductions(int dev, unsigned char* d1, unsigned char* d2);
  void host_memory(int dev, unsigned char* d1);
  void ipc(int dev, unsigned char* d1);
  void dmabuf(int dev, unsigned char* d1);
  std::string id(const char* name) const { return prefix_ + name; }
  // Opens c on dev; when it fails, reports check as failed under rule and returns false.
  bool open(Copier& c, int dev, const char* check, const char* rule) {
    const char* what = "";
    const int st = c.open(dev, &what);
    if (st == HMC_PLUGIN_SUCCESS) return true;
    r_.fail(id(check), rule, "%s on device %d returned %s", what, dev, status_name(st));
    return false;
  }

  const hmc_device_plugin_v1_t* t_;
  hmc_device_ctx_t* ctx_;
  const DeviceTarget& target_;
  DeviceOptions options_;
  Waiter wait_;
  Report& r_;
  int count_ = 0;
  std::vector<hmc_device_props_t> props_;
  std::string prefix_;
};

void DeviceCheck::run() {
  r_.step("devices");
  if (!devices()) return;
  contexts();
  if (count_ == 0) return;
  for (int d : chosen_devices(r_, "device", options_.device, count_)) {
    // With every device exercised, each check's name says which.
    if (options_.device < 0) prefix_ = "dev" + std::to_string(d) + ".";
    exercise(d);
  }
  prefix_.clear();
}

bool DeviceCheck::devices() {
  int st = t_->device_count(ctx_, &count_);
  if (st != HMC_PLUGIN_SUCCESS || count_ < 0) {
    r_.fail("devices", rule::kDeviceInfo, "device_count returned %s with %d", status_name(st),
            count_);
    return false;
  }
  if (count_ == 0) {
    const char* why = t_->unavailable_reason(ctx_);
    if (why == nullptr || *why == '\0')
      r_.warn("devices", rule::kNoDevice, "0 devices, and unavailable_reason gives no reason");
    if (options_.require_devices)
      r_.fail("devices", rule::kNoDevice, "0 devices here (--require-devices): %s",
              why != nullptr ? why : "no reason given");
    else
      r_.skip("devices", "0 devices here, so nothing is exercised: %s",
              why != nullptr ? why : "no reason given");
    return true;
  }
  std::string names;
  auto info = [&](int d, hmc_device_props_t* p) { return t_->device_info(ctx_, d, p); };
  hmc_device_props_t blank{};
  blank.hdr = HMC_ABI_HEADER_INIT(hmc_device_props_t);
  for (int d = 0; d < count_; ++d) {
    hmc_device_props_t p = blank;
    if (!read_props(r_, "device_info", rule::kDeviceInfo, d, &p, info)) return false;
    if (p.name == nullptr || *p.name == '\0')
      r_.fail("device_info", rule::kDeviceInfo, "device %d has no name", d);
    if ((p.caps & HMC_DEVICE_CAP_IPC) &&
        (p.ipc_handle_size == 0 || p.ipc_handle_size > HMC_DEVICE_IPC_HANDLE_MAX))
      r_.fail("device_info", rule::kDeviceInfo,
              "device %d sets HMC_DEVICE_CAP_IPC with an "
              "ipc_handle_size of %u bytes",
              d, p.ipc_handle_size);
    names += std::string(names.empty() ? "" : ", ") + (p.name != nullptr ? p.name : "(unnamed)");
    props_.push_back(p);
  }
  const char* runtime = t_->runtime_version(ctx_);
  r_.ok("device_info", "%d device%s (%s), runtime %s", count_, count_ == 1 ? "" : "s",
        names.c_str(), runtime != nullptr ? runtime : "(none given)");

  ExpectedErrors quiet;
  check_indices_refused(r_, "device_info", count_, blank, info);
  void* none = nullptr;
  st = t_->mem_alloc(ctx_, count_, 4096, &none);
  if (st == HMC_PLUGIN_SUCCESS) {
    r_.fail("device_index", rule::kDeviceIndex, "mem_alloc on device %d (of %d) returned SUCCESS",
            count_, count_);
    t_->mem_free(ctx_, none);
  }

  // A caller that does not know the appended copy_bandwidth_MBps.
  check_short_struct<hmc_device_props_t>(
      r_, "device_info", offsetof(hmc_device_props_t, copy_bandwidth_MBps), HMC_PLUGIN_ABI_VERSION,
      [&](hmc_device_props_t* shorter) { return info(0, shorter); });
  return true;
}

void DeviceCheck::contexts() {
  r_.step("a second context");
  hmc_device_ctx_t* other = nullptr;
  int st = t_->init(target_.host, &other);
  if (st != HMC_PLUGIN_SUCCESS || other == nullptr) {
    r_.fail("contexts", rule::kContexts, "a second init returned %s", status_name(st));
    return;
  }
  int n = -1;
  st = t_->device_count(other, &n);
  int fin = t_->finalize(other);
  if (st != HMC_PLUGIN_SUCCESS || n != count_)
    r_.fail("contexts", rule::kContexts, "the second context has %d devices (%s), the first %d", n,
            status_name(st), count_);
  else if (fin != HMC_PLUGIN_SUCCESS)
    r_.fail("contexts", rule::kContexts, "finalize of the second context returned %s",
            status_name(fin));
  else
    r_.ok("contexts", "a second context, with the same %d device%s, finalized", n,
          n == 1 ? "" : "s");
}

void DeviceCheck::exercise(int dev) {
  r_.step("memory");
  void* p1 = nullptr;
  void* p2 = nullptr;
  int st = t_->mem_alloc(ctx_, dev, kAlloc, &p1);
  if (st == HMC_PLUGIN_SUCCESS) st = t_->mem_alloc(ctx_, dev, kAlloc, &p2);
  if (st != HMC_PLUGIN_SUCCESS || p1 == nullptr || p2 == nullptr) {
    r_.fail(id("alloc"), rule::kAlloc, "mem_alloc of %zu bytes on device %d returned %s", kAlloc,
            dev, status_name(st));
    if (p1 != nullptr) t_->mem_free(ctx_, p1);
    return;
  }
  auto* d1 = static_cast<unsigned char*>(p1);
  auto* d2 = static_cast<unsigned char*>(p2);

  hmc_device_ptr_info_t info{};
  info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
  st = t_->ptr_query(ctx_, d1 + 100, &info);
  if (st != HMC_PLUGIN_SUCCESS || info.owned != 1 || info.device != dev || info.is_host != 0 ||
      info.base != reinterpret_cast<uintptr_t>(d1) || info.size < kAlloc)
    r_.fail(id("alloc"), rule::kAlloc,
            "ptr_query inside a %zu-byte allocation at %p answered %s: owned %d, device %d, "
            "is_host %d, base 0x%llx, size %llu",
            kAlloc, p1, status_name(st), info.owned, info.device, info.is_host,
            static_cast<unsigned long long>(info.base), static_cast<unsigned long long>(info.size));
  else
    r_.ok(id("alloc"), "%zu bytes on device %d, known to ptr_query", kAlloc, dev);

  int on_stack = 0;
  info = hmc_device_ptr_info_t{};
  info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
  int freed;
  {
    ExpectedErrors quiet;
    st = t_->ptr_query(ctx_, &on_stack, &info);
    freed = t_->mem_free(ctx_, &on_stack);
  }
  if (st != HMC_PLUGIN_SUCCESS || info.owned != 0)
    r_.fail(id("foreign"), rule::kForeign, "ptr_query of a stack address answered %s, owned %d",
            status_name(st), info.owned);
  else if (freed == HMC_PLUGIN_SUCCESS)
    r_.fail(id("foreign"), rule::kForeign, "mem_free of a stack address returned SUCCESS");
  else
    r_.ok(id("foreign"), "a stack address is not the plugin's");

  copies(dev, d1, d2);
  reductions(dev, d1, d2);
  host_memory(dev, d1);
  dmabuf(dev, d1);
  ipc(dev, d1);

  r_.step("free");
  int f1 = t_->mem_free(ctx_, p1), f2 = t_->mem_free(ctx_, p2);
  if (f1 != HMC_PLUGIN_SUCCESS || f2 != HMC_PLUGIN_SUCCESS)
    r_.fail(id("free"), rule::kAlloc, "mem_free returned %s and %s", status_name(f1),
            status_name(f2));
  else
    r_.ok(id("free"), "both allocations freed");
}

void DeviceCheck::copies(int dev, unsigned char* d1, unsigned char* d2) {
  r_.step("copies");
  Copier c(t_, ctx_, wait_);
  if (!open(c, dev, "copy", rule::kCopy)) return;
  std::vector<unsigned char> src(kAlloc), back(kAlloc, 0);
  fill_pattern(src.data(), kAlloc, 21);
  // Host to device, then device to device and device to host behind one event.
  int st = c.copy(d1, src.data(), kAlloc, HMC_COPY_HOST_TO_DEVICE);
  if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
  if (st == HMC_PLUGIN_SUCCESS) st = c.copy(d2, d1, kAlloc, HMC_COPY_DEVICE_TO_DEVICE);
  if (st == HMC_PLUGIN_SUCCESS) st = c.copy(back.data(), d2, kAlloc, HMC_COPY_DEVICE_TO_HOST);
  if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
  size_t bad = pattern_mismatch(back.data(), kAlloc, 21);
  if (st != HMC_PLUGIN_SUCCESS || bad != kAlloc) {
    r_.fail(id("copy"), rule::kCopy,
            "host->device->device->host of %zu bytes: %s%s, first wrong byte %zu", kAlloc,
            status_name(st), st == HMC_PLUGIN_IN_PROGRESS ? " when the time was up" : "", bad);
    return;
  }
  // Unaligned: a piece at an odd offset, there and back.
  fill_pattern(src.data(), kOddSize, 22);
  std::memset(back.data(), 0, kOddSize);
  st = c.copy(d1 + kOddOffset, src.data(), kOddSize, HMC_COPY_HOST_TO_DEVICE);
  if (st == HMC_PLUGIN_SUCCESS)
    st = c.copy(back.data(), d1 + kOddOffset, kOddSize, HMC_COPY_DEVICE_TO_HOST);
  if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
  bad = pattern_mismatch(back.data(), kOddSize, 22);
  if (st != HMC_PLUGIN_SUCCESS || bad != kOddSize)
    r_.fail(id("copy"), rule::kCopy,
            "%zu bytes at offset %zu there and back: %s, first wrong "
            "byte %zu",
            kOddSize, kOddOffset, status_name(st), bad);
  else
    r_.ok(id("copy"),
          "host->device, device->device, device->host (%zu bytes, and %zu at an odd "
          "offset), completed through events",
          kAlloc, kOddSize);
}

// Operands of a reduction: values whose results stay in range (sums and products of small
// numbers), with negative ones for the signed types, so that MIN and MAX have work.
void fill_operand(std::vector<unsigned char>* v, uint32_t dtype, size_t count, int seed) {
  size_t es = coll::dtype_size(static_cast<hmc_dtype_t>(dtype));
  v->assign(count * es, 0);
  for (size_t i = 0; i < count; ++i) {
    int k = static_cast<int>((i * 7 + static_cast<size_t>(seed) * 13) % 23) - 11;
    unsigned char* at = v->data() + i * es;
    switch (dtype) {
      case HMC_DEVICE_DTYPE_F32: {
        float f = static_cast<float>(k) * 0.37f;
        std::memcpy(at, &f, 4);
        break;
      }
      case HMC_DEVICE_DTYPE_F64: {
        double d = k * 0.37;
        std::memcpy(at, &d, 8);
        break;
      }
      case HMC_DEVICE_DTYPE_F16: {  // k / 4, exact in binary16: sign, exponent, 10 bits
        uint16_t h = 0;
        if (k != 0) {
          unsigned m = static_cast<unsigned>(k < 0 ? -k : k), e = 0;
          while ((m >> e) > 1) ++e;
          h = static_cast<uint16_t>((k < 0 ? 0x8000u : 0u) | ((e + 15u - 2u) << 10) |
                                    (((m << 10) >> e) & 0x3ffu));
        }
        std::memcpy(at, &h, 2);
        break;
      }
      case HMC_DEVICE_DTYPE_BF16: {  // k / 4, exact in bfloat16: the top half of the f32
        float f = static_cast<float>(k) / 4.0f;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t b = static_cast<uint16_t>(bits >> 16);
        std::memcpy(at, &b, 2);
        break;
      }
      case HMC_DEVICE_DTYPE_I8: *reinterpret_cast<int8_t*>(at) = static_cast<int8_t>(k); break;
      case HMC_DEVICE_DTYPE_U8: *at = static_cast<unsigned char>(k + 11); break;
      case HMC_DEVICE_DTYPE_I32: {
        int32_t x = k * 100003;
        std::memcpy(at, &x, 4);
        break;
      }
      case HMC_DEVICE_DTYPE_I64: {
        int64_t x = int64_t{k} * 4000000007LL;
        std::memcpy(at, &x, 8);
        break;
      }
    }
  }
}

// Index of the first element where got and want differ: bit for bit for integers, within a
// relative 1e-6 (1e-3 for the 16-bit types) for floats. count when none.
size_t reduction_mismatch(const unsigned char* got, const unsigned char* want, uint32_t dtype,
                          size_t count) {
  size_t es = coll::dtype_size(static_cast<hmc_dtype_t>(dtype));
  auto value = [&](const unsigned char* p) -> double {
    if (dtype == HMC_DEVICE_DTYPE_F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    if (dtype == HMC_DEVICE_DTYPE_F64) {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    if (dtype == HMC_DEVICE_DTYPE_BF16) {
      uint32_t bits = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024.0 + m, static_cast<int>(e) - 25);
    return (h & 0x8000u) ? -mag : mag;
  };
  bool is_float = dtype <= HMC_DEVICE_DTYPE_BF16;
  double tol = dtype == HMC_DEVICE_DTYPE_F16 || dtype == HMC_DEVICE_DTYPE_BF16 ? 1e-3 : 1e-6;
  for (size_t i = 0; i < count; ++i) {
    const unsigned char *g = got + i * es, *w = want + i * es;
    if (!is_float) {
      if (std::memcmp(g, w, es) != 0) return i;
      continue;
    }
    double a = value(g), b = value(w);
    if (!(std::fabs(a - b) <= tol * std::fabs(b) + 1e-30)) return i;
  }
  return count;
}

void DeviceCheck::reductions(int dev, unsigned char* d1, unsigned char* d2) {
  if (t_->reduce == nullptr) {
    r_.skip(id("reduce"), "no reduce slot: the core reduces this plugin's memory on the host");
    return;
  }
  r_.step("reductions");
  Copier c(t_, ctx_, wait_);
  if (!open(c, dev, "reduce", rule::kReduce)) return;
  int st = HMC_PLUGIN_SUCCESS;
  static const char* const kTypes[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64"};
  static const char* const kOps[] = {"sum", "prod", "min", "max"};
  constexpr size_t kCount = 1001;  // odd: no kernel gets whole vectors only
  int done = 0;
  std::string declined;
  for (uint32_t dtype = HMC_DEVICE_DTYPE_F32; dtype <= HMC_DEVICE_DTYPE_I64; ++dtype) {
    for (uint32_t op = HMC_DEVICE_REDUCE_SUM; op <= HMC_DEVICE_REDUCE_MAX; ++op) {
      std::vector<unsigned char> a, b, got;
      fill_operand(&a, dtype, kCount, static_cast<int>(op));
      fill_operand(&b, dtype, kCount, static_cast<int>(op + 5));
      got.assign(a.size(), 0);
      std::vector<unsigned char> want = a;
      coll::reduce_into(want.data(), b.data(), kCount, static_cast<hmc_dtype_t>(dtype),
                        static_cast<hmc_reduce_op_t>(op));
      // dst is the first operand (in place), as the core calls it.
      st = c.copy(d1, a.data(), a.size(), HMC_COPY_HOST_TO_DEVICE);
      if (st == HMC_PLUGIN_SUCCESS) st = c.copy(d2, b.data(), b.size(), HMC_COPY_HOST_TO_DEVICE);
      int red = HMC_PLUGIN_SUCCESS;
      if (st == HMC_PLUGIN_SUCCESS)
        st = red = t_->reduce(c.stream(), d1, d1, d2, kCount, dtype, op);
      if (red == HMC_PLUGIN_ERR_NOT_SUPPORTED) {
        c.finish();
        declined += std::string(declined.empty() ? "" : ", ") + kTypes[dtype] + " " + kOps[op];
        continue;
      }
      if (st == HMC_PLUGIN_SUCCESS)
        st = c.copy(got.data(), d1, got.size(), HMC_COPY_DEVICE_TO_HOST);
      if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
      size_t bad = st == HMC_PLUGIN_SUCCESS
                       ? reduction_mismatch(got.data(), want.data(), dtype, kCount)
                       : kCount;
      if (st != HMC_PLUGIN_SUCCESS || bad != kCount) {
        r_.fail(id("reduce"), rule::kReduce, "%s %s of %zu elements: %s%s, first wrong element %zu",
                kTypes[dtype], kOps[op], kCount, status_name(st),
                st == HMC_PLUGIN_IN_PROGRESS ? " when the time was up" : "", bad);
        c.finish();  // nothing enqueued may still read a and b
        return;
      }
      ++done;
    }
  }
  int bad_type, bad_op;
  {
    ExpectedErrors quiet;
    bad_type = t_->reduce(c.stream(), d1, d1, d2, 16, 99, HMC_DEVICE_REDUCE_SUM);
    bad_op = t_->reduce(c.stream(), d1, d1, d2, 16, HMC_DEVICE_DTYPE_I32, 99);
  }
  c.finish();
  if (bad_type != HMC_PLUGIN_ERR_INVALID_ARGUMENT || bad_op != HMC_PLUGIN_ERR_INVALID_ARGUMENT) {
    r_.fail(id("reduce"), rule::kReduce,
            "an unknown dtype (99) answered %s and an unknown op (99) %s, not "
            "HMC_PLUGIN_ERR_INVALID_ARGUMENT",
            status_name(bad_type), status_name(bad_op));
    return;
  }
  if (done == 0) {
    r_.warn(id("reduce"), rule::kReduce,
            "the reduce slot declines every dtype and op (leave it NULL instead)");
    return;
  }
  r_.ok(id("reduce"),
        "%d of the 32 dtype and op pairs on %zu elements, in place, integers exact and floats "
        "within rounding%s%s; unknown dtype and op refused",
        done, kCount,
        declined.empty() ? "" : "; declined (the host reduces them): ", declined.c_str());
}

void DeviceCheck::host_memory(int dev, unsigned char* d1) {
  if (t_->host_alloc != nullptr && t_->host_free != nullptr) {
    r_.step("pinned host memory");
    void* h = nullptr;
    int st = t_->host_alloc(ctx_, kAlloc, &h);
    if (st != HMC_PLUGIN_SUCCESS || h == nullptr) {
      r_.fail(id("host_alloc"), rule::kHostAlloc, "host_alloc of %zu bytes returned %s", kAlloc,
              status_name(st));
    } else {
      auto* hp = static_cast<unsigned char*>(h);
      fill_pattern(hp, kAlloc, 23);
      std::vector<unsigned char> back(kAlloc, 0);
      Copier c(t_, ctx_, wait_);
      const char* what = "";
      st = c.open(dev, &what);
      if (st == HMC_PLUGIN_SUCCESS) st = c.copy(d1, hp, kAlloc, HMC_COPY_HOST_TO_DEVICE);
      if (st == HMC_PLUGIN_SUCCESS) st = c.copy(back.data(), d1, kAlloc, HMC_COPY_DEVICE_TO_HOST);
      if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
      size_t bad = pattern_mismatch(back.data(), kAlloc, 23);
      hmc_device_ptr_info_t info{};
      info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
      int q = t_->ptr_query(ctx_, hp, &info);
      int freed = t_->host_free(ctx_, h);
      if (st != HMC_PLUGIN_SUCCESS || bad != kAlloc)
        r_.fail(id("host_alloc"), rule::kHostAlloc,
                "copies through pinned host memory: %s, first wrong byte %zu", status_name(st),
                bad);
      else if (q != HMC_PLUGIN_SUCCESS || info.owned != 1 || info.is_host != 1)
        r_.fail(id("host_alloc"), rule::kHostAlloc,
                "ptr_query of pinned host memory answered %s, owned %d, is_host %d", status_name(q),
                info.owned, info.is_host);
      else if (freed != HMC_PLUGIN_SUCCESS)
        r_.fail(id("host_alloc"), rule::kHostAlloc, "host_free returned %s", status_name(freed));
      else
        r_.ok(id("host_alloc"), "pinned host memory, copied to and from the device");
    }
  } else {
    r_.skip(id("host_alloc"), "host_alloc is not offered");
  }

  if (!(props_[dev].caps & HMC_DEVICE_CAP_HOST_REGISTER)) return;
  r_.step("host registration");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(page, kAlloc), &std::free);
  int st = t_->host_register(ctx_, mem.get(), kAlloc);
  if (st != HMC_PLUGIN_SUCCESS) {
    r_.fail(id("host_register"), rule::kHostAlloc, "host_register of %zu bytes returned %s", kAlloc,
            status_name(st));
    return;
  }
  st = t_->host_unregister(ctx_, mem.get());
  if (st != HMC_PLUGIN_SUCCESS)
    r_.fail(id("host_register"), rule::kHostAlloc, "host_unregister returned %s", status_name(st));
  else
    r_.ok(id("host_register"), "%zu bytes registered and unregistered", kAlloc);
}

void DeviceCheck::dmabuf(int dev, unsigned char* d1) {
  if (!(props_[dev].caps & HMC_DEVICE_CAP_DMABUF)) {
    r_.skip(id("dmabuf"), "device %d does not set HMC_DEVICE_CAP_DMABUF", dev);
    return;
  }
  r_.step("dma-buf export");
  int fd = -1;
  uint64_t offset = 0;
  int st = t_->dmabuf_export(ctx_, d1, kAlloc, &fd, &offset);
  if (st != HMC_PLUGIN_SUCCESS || fd < 0) {
    r_.fail(id("dmabuf"), rule::kDmabuf,
            "dmabuf_export of a %zu-byte allocation returned %s, fd %d", kAlloc, status_name(st),
            fd);
    return;
  }
  ::close(fd);
  r_.ok(id("dmabuf"), "an fd for %zu bytes at offset %llu", kAlloc,
        static_cast<unsigned long long>(offset));
}

// Runs the peer; its exit status, or -1 when it did not end within the limit (then killed).
int run_peer(const std::vector<std::string>& args, std::chrono::milliseconds limit) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -2;
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void DeviceCheck::ipc(int dev, unsigned char* d1) {
  if (!(props_[dev].caps & HMC_DEVICE_CAP_IPC)) {
    r_.skip(id("ipc"), "device %d does not set HMC_DEVICE_CAP_IPC", dev);
    return;
  }
  r_.step("IPC");
  // The pattern the peer must see, in the exported allocation.
  std::vector<unsigned char> buf(kAlloc);
  fill_pattern(buf.data(), kAlloc, 31);
  Copier c(t_, ctx_, wait_);
  const char* what = "";
  int st = c.open(dev, &what);
  if (st == HMC_PLUGIN_SUCCESS) st = c.copy(d1, buf.data(), kAlloc, HMC_COPY_HOST_TO_DEVICE);
  if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
  if (st != HMC_PLUGIN_SUCCESS) {
    r_.fail(id("ipc"), rule::kCopy, "preparing the exported memory: %s", status_name(st));
    return;
  }
  unsigned char handle[HMC_DEVICE_IPC_HANDLE_MAX + 64];
  size_t len = HMC_DEVICE_IPC_HANDLE_MAX;
  st = t_->ipc_export(ctx_, d1, handle, &len);
  if (st != HMC_PLUGIN_SUCCESS || len == 0 || len > HMC_DEVICE_IPC_HANDLE_MAX) {
    r_.fail(id("ipc"), rule::kIpc, "ipc_export returned %s with a %zu-byte handle", status_name(st),
            len);
    return;
  }
  int rc =
      run_peer({options_.self, "--ipc-peer", target_.path, std::to_string(dev), to_hex(handle, len),
                std::to_string(kAlloc), "31", std::to_string(wait_.limit().count())},
               wait_.limit() * 3);
  if (rc != 0) {
    r_.fail(id("ipc"), rule::kIpc, "the peer process %s (its messages are above)",
            rc == -1   ? "did not end in time"
            : rc == -2 ? "could not be started"
                       : ("exited with " + std::to_string(rc)).c_str());
    return;
  }
  std::memset(buf.data(), 0, kAlloc);
  st = c.copy(buf.data(), d1, kAlloc, HMC_COPY_DEVICE_TO_HOST);
  if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
  size_t bad = pattern_mismatch(buf.data(), kAlloc, 32);
  if (st != HMC_PLUGIN_SUCCESS || bad != kAlloc)
    r_.fail(id("ipc"), rule::kIpc,
            "what the peer wrote through its mapping: %s, first wrong "
            "byte %zu",
            status_name(st), bad);
  else
    r_.ok(id("ipc"), "another process opened a %zu-byte handle, read the memory and wrote it", len);
}

// The peer's problems go to stderr (the checker's output shows them above its verdict).
int peer_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int peer_fail(const char* fmt, ...) {
  std::fprintf(stderr, "hmc-plugin-check (IPC peer): ");
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  return 1;
}

int ipc_peer(const std::vector<std::string>& args) {
  std::vector<unsigned char> handle;
  if (args.size() != 6 || !from_hex(args[2], &handle))
    return peer_fail("usage: --ipc-peer PLUGIN DEVICE HANDLE_HEX SIZE SEED TIMEOUT_MS");
  const int dev = std::atoi(args[1].c_str());
  const size_t size = std::strtoull(args[3].c_str(), nullptr, 10);
  const unsigned seed = static_cast<unsigned>(std::strtoul(args[4].c_str(), nullptr, 10));
  Target target;
  std::string why;
  if (!parse_target(args[0], &target, &why)) return peer_fail("%s", why.c_str());
  auto loader = load_targets({target}, false);
  const plugin::Record* rec = find_record(*loader, target);
  if (rec == nullptr || rec->device == nullptr)
    return peer_fail("%s did not load: %s", args[0].c_str(),
                     rec != nullptr ? rec->reason.c_str() : "not found");
  const hmc_device_plugin_v1_t* t = rec->device;
  hmc_device_ctx_t* ctx = rec->device_ctx;
  void* mapped = nullptr;
  int st = t->ipc_open(ctx, dev, handle.data(), handle.size(), &mapped);
  if (st != HMC_PLUGIN_SUCCESS) return peer_fail("ipc_open returned %s", status_name(st));
  // The checker's --timeout: the peer's waits end before the checker stops waiting for it.
  Waiter wait(std::chrono::milliseconds(std::strtoll(args[5].c_str(), nullptr, 10)));
  int rc = 0;
  {
    Copier c(t, ctx, wait);
    const char* what = "";
    std::vector<unsigned char> buf(size);
    st = c.open(dev, &what);
    if (st == HMC_PLUGIN_SUCCESS) st = c.copy(buf.data(), mapped, size, HMC_COPY_DEVICE_TO_HOST);
    if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
    if (st != HMC_PLUGIN_SUCCESS) {
      rc = peer_fail("reading the mapping: %s", status_name(st));
    } else if (size_t bad = pattern_mismatch(buf.data(), size, seed); bad != size) {
      rc = peer_fail("the mapping does not hold what the exporter wrote (byte %zu)", bad);
    } else {
      fill_pattern(buf.data(), size, seed + 1);
      st = c.copy(mapped, buf.data(), size, HMC_COPY_HOST_TO_DEVICE);
      if (st == HMC_PLUGIN_SUCCESS) st = c.finish();
      if (st != HMC_PLUGIN_SUCCESS)
        rc = peer_fail("writing through the mapping: %s", status_name(st));
    }
  }
  st = t->ipc_close(ctx, mapped);
  if (st != HMC_PLUGIN_SUCCESS && rc == 0) rc = peer_fail("ipc_close returned %s", status_name(st));
  return rc;
}

}  // namespace

void check_device(const DeviceTarget& target, const DeviceOptions& options, Report& report) {
  DeviceCheck(target, options, report).run();
}

int ipc_peer_main(const std::vector<std::string>& args) {
  return ipc_peer(args);
}

}  // namespace hmc::check

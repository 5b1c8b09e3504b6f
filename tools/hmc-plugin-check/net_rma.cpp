// One-sided operations over the loopback: the server context registers a region of host memory
// between two guards; the client context puts into it and gets from it with the server's key.
#include <cstring>
#include <vector>

#include "hmc/plugin/status.hpp"
#include "net_loopback.h"
#include "pattern.h"
#include "rules.h"

namespace hmc::check {
namespace {

using hmc::plugin::status_name;

constexpr size_t kRegion = 64 << 10;             // the target's registered region
constexpr size_t kGuard = 4 << 10;               // bytes either side of it, never to change
constexpr size_t kPiece = 4096 + 3;              // one put or get
constexpr size_t kPutAt = 1000, kGetAt = 20000;  // offsets in the region

class RmaCheck {
 public:
  explicit RmaCheck(Loopback& lb)
      : lb_(lb),
        t_(lb.t),
        r_(lb.report),
        target_(kGuard + kRegion + kGuard, 0x5A),
        region_(target_.data() + kGuard),
        base_(reinterpret_cast<uintptr_t>(region_)),
        src_(kPiece + 64),
        dst_(kPiece + 64) {}

  void run();

 private:
  bool register_region();
  void other_devices();
  void put();
  void get();
  void bounds();
  void access();
  void vectored();
  void release();
  // Waits for a one-sided request posted with status posted; its end, or IN_PROGRESS when it
  // did not end within the limit (reported under name).
  int finish(int posted, hmc_net_request_t* q, const char* name);

  Loopback& lb_;
  const hmc_net_plugin_v2_t* t_;
  Report& r_;
  std::vector<unsigned char> target_;  // guard, region, guard
  unsigned char* region_;
  uint64_t base_;
  hmc_net_mr_t* region_mr_ = nullptr;
  unsigned char rkey_[HMC_NET_RKEY_MAX + 64];
  size_t rkey_len_ = 0;
  hmc_net_rkey_t* rk_ = nullptr;
  Buffer src_, dst_;
};

void RmaCheck::run() {
  r_.step("one-sided: registration");
  if (!register_region()) return;
  other_devices();
  int st = t_->rkey_unpack(lb_.client, rkey_, rkey_len_, &rk_);
  if (st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb_.id("rkey_unpack"), rule::kRegister, "rkey_unpack of the peer's key returned %s",
            status_name(st));
    rk_ = nullptr;
  } else if (src_.reg(lb_, lb_.client_ctx, HMC_NET_ACCESS_LOCAL, true, "put") &&
             dst_.reg(lb_, lb_.client_ctx, HMC_NET_ACCESS_LOCAL, false, "get")) {
    r_.step("one-sided: put and get");
    put();
    get();
    r_.step("one-sided: bounds");
    bounds();
    r_.step("one-sided: access");
    access();
    r_.step("one-sided: vectored");
    vectored();
  }
  r_.step("one-sided: release");
  release();
}

bool RmaCheck::register_region() {
  const uint32_t all =
      HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;
  hmc_net_mem_desc_t d = host_mem_desc(region_, kRegion, all);
  int st = t_->reg_mr(lb_.server_ctx, lb_.dev, &d, &region_mr_, rkey_, &rkey_len_);
  if (st != HMC_PLUGIN_SUCCESS || rkey_len_ == 0 || rkey_len_ > HMC_NET_RKEY_MAX) {
    r_.fail(lb_.id("register"), rule::kRegister,
            "reg_mr of %zu bytes of host memory on device %d returned %s with a %zu-byte key",
            kRegion, lb_.dev, status_name(st), rkey_len_);
    if (st == HMC_PLUGIN_SUCCESS) t_->dereg_mr(lb_.server_ctx, region_mr_);
    return false;
  }
  r_.ok(lb_.id("register"), "%zu bytes on device %d, a %zu-byte remote key", kRegion, lb_.dev,
        rkey_len_);
  return true;
}

// Registration is per device: every other device that says RMA registers the same memory, with
// a key of its own.
void RmaCheck::other_devices() {
  const uint32_t all =
      HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;
  hmc_net_mem_desc_t d = host_mem_desc(region_, kRegion, all);
  int checked = 0;
  for (size_t other = 0; other < lb_.props.size(); ++other) {
    if (static_cast<int>(other) == lb_.dev || !(lb_.props[other].flags & HMC_NET_FLAG_RMA))
      continue;
    hmc_net_mr_t* m = nullptr;
    unsigned char k[HMC_NET_RKEY_MAX + 64];
    size_t klen = 0;
    int st = t_->reg_mr(lb_.server_ctx, static_cast<int>(other), &d, &m, k, &klen);
    if (st != HMC_PLUGIN_SUCCESS || klen == 0 || klen > HMC_NET_RKEY_MAX) {
      r_.fail(lb_.id("register_per_device"), rule::kRegister,
              "reg_mr of the same memory on device %zu returned %s with a %zu-byte key", other,
              status_name(st), klen);
      if (st == HMC_PLUGIN_SUCCESS) t_->dereg_mr(lb_.server_ctx, m);
      return;
    }
    if ((st = t_->dereg_mr(lb_.server_ctx, m)) != HMC_PLUGIN_SUCCESS) {
      r_.fail(lb_.id("register_per_device"), rule::kRegister, "dereg_mr on device %zu returned %s",
              other, status_name(st));
      return;
    }
    ++checked;
  }
  if (checked > 0)
    r_.ok(lb_.id("register_per_device"), "the same memory registers on %d other device%s", checked,
          checked == 1 ? "" : "s");
}

int RmaCheck::finish(int posted, hmc_net_request_t* q, const char* name) {
  if (posted != HMC_PLUGIN_SUCCESS) return posted;
  int st = HMC_PLUGIN_IN_PROGRESS;
  size_t bytes = 0;
  if (!lb_.wait(q, &st, &bytes))
    r_.fail(lb_.id(name), rule::kNoBlock, "it did not end within %.1f s", lb_.waiter.seconds());
  return st;
}

// Through a registered local buffer.
void RmaCheck::put() {
  fill_pattern(src_.data(), kPiece, 11);
  hmc_net_request_t* q = nullptr;
  int p = t_->iput(lb_.client, src_.data(), kPiece, src_.mr(), base_ + kPutAt, rk_, &q);
  int st = finish(p, q, "put");
  if (st == HMC_PLUGIN_IN_PROGRESS) return;
  size_t bad = pattern_mismatch(region_ + kPutAt, kPiece, 11);
  if (st != HMC_PLUGIN_SUCCESS || bad != kPiece)
    r_.fail(lb_.id("put"), rule::kPutGet,
            "a put of %zu bytes %s %s; first wrong byte at the target: %zu", kPiece,
            p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused with", status_name(st), bad);
  else
    r_.ok(lb_.id("put"), "%zu bytes in place at the target when the put ended", kPiece);
}

// Into a buffer registered only when the device needs it.
void RmaCheck::get() {
  fill_pattern(region_ + kGetAt, kPiece, 12);
  std::memset(dst_.data(), 0, dst_.size());
  hmc_net_request_t* q = nullptr;
  int p = t_->iget(lb_.client, dst_.data(), kPiece, dst_.mr(), base_ + kGetAt, rk_, &q);
  int st = finish(p, q, "get");
  if (st == HMC_PLUGIN_IN_PROGRESS) return;
  size_t bad = pattern_mismatch(dst_.data(), kPiece, 12);
  if (st != HMC_PLUGIN_SUCCESS || bad != kPiece)
    r_.fail(lb_.id("get"), rule::kPutGet, "a get of %zu bytes %s %s; first wrong byte: %zu", kPiece,
            p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused with", status_name(st), bad);
  else
    r_.ok(lb_.id("get"), "%zu bytes in place when the get ended", kPiece);
}

// A put across the region's end and a get from before its start: refused with REMOTE (when
// posted or when they end), and no byte of the region or its guards touched.
void RmaCheck::bounds() {
  fill_pattern(region_ + kRegion - 32, 32, 13);
  fill_pattern(src_.data(), 64, 14);
  const std::vector<unsigned char> before(target_);
  struct Probe {
    const char* what;
    bool put;
    uint64_t addr;
  };
  const Probe probes[] = {{"a put of 64 bytes across the region's end", true, base_ + kRegion - 32},
                          {"a get of 64 bytes from before the region", false, base_ - 16}};
  bool good = true;
  ExpectedErrors quiet;
  for (const Probe& pr : probes) {
    hmc_net_request_t* q = nullptr;
    int p = pr.put ? t_->iput(lb_.client, src_.data(), 64, src_.mr(), pr.addr, rk_, &q)
                   : t_->iget(lb_.client, dst_.data(), 64, dst_.mr(), pr.addr, rk_, &q);
    int st = finish(p, q, "bounds");
    if (st == HMC_PLUGIN_IN_PROGRESS) {
      good = false;
    } else if (st != HMC_PLUGIN_ERR_REMOTE) {
      r_.fail(lb_.id("bounds"), rule::kBounds, "%s %s %s", pr.what,
              p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused when posted with",
              status_name(st));
      good = false;
    }
  }
  if (before != target_) {
    size_t i = 0;
    while (before[i] == target_[i]) ++i;
    r_.fail(lb_.id("bounds"), rule::kBounds,
            "the refused accesses changed the target's memory (byte %lld from the region's start)",
            static_cast<long long>(i) - static_cast<long long>(kGuard));
    good = false;
  }
  if (good) r_.ok(lb_.id("bounds"), "out-of-range put and get end REMOTE, no byte touched");
}

// A region registered for remote reads only refuses a put, one for remote writes only refuses a
// get: REMOTE, and no byte of it changed.
void RmaCheck::access() {
  struct Probe {
    const char* what;
    uint32_t granted;
    bool put;
  };
  const Probe probes[] = {{"a put into memory registered without HMC_NET_ACCESS_REMOTE_WRITE",
                           HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ, true},
                          {"a get from memory registered without HMC_NET_ACCESS_REMOTE_READ",
                           HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_WRITE, false}};
  bool good = true;
  ExpectedErrors quiet;
  for (const Probe& pr : probes) {
    std::vector<unsigned char> mem(4096, 0x3C);
    const std::vector<unsigned char> before(mem);
    hmc_net_mem_desc_t d = host_mem_desc(mem.data(), mem.size(), pr.granted);
    hmc_net_mr_t* mr = nullptr;
    unsigned char key[HMC_NET_RKEY_MAX + 64];
    size_t key_len = 0;
    hmc_net_rkey_t* rk = nullptr;
    int st = t_->reg_mr(lb_.server_ctx, lb_.dev, &d, &mr, key, &key_len);
    if (st == HMC_PLUGIN_SUCCESS) st = t_->rkey_unpack(lb_.client, key, key_len, &rk);
    if (st != HMC_PLUGIN_SUCCESS) {
      r_.fail(lb_.id("access"), rule::kRegister,
              "registering 4096 bytes with partial access, or unpacking its key: %s",
              status_name(st));
      if (mr != nullptr) t_->dereg_mr(lb_.server_ctx, mr);
      return;
    }
    const uint64_t at = reinterpret_cast<uintptr_t>(mem.data()) + 64;
    hmc_net_request_t* q = nullptr;
    int p = pr.put ? t_->iput(lb_.client, src_.data(), 64, src_.mr(), at, rk, &q)
                   : t_->iget(lb_.client, dst_.data(), 64, dst_.mr(), at, rk, &q);
    st = finish(p, q, "access");
    if (st == HMC_PLUGIN_IN_PROGRESS) {
      good = false;
    } else if (st != HMC_PLUGIN_ERR_REMOTE || mem != before) {
      r_.fail(lb_.id("access"), rule::kAccess, "%s %s %s%s", pr.what,
              p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused when posted with",
              status_name(st), mem != before ? ", and changed the memory" : "");
      good = false;
    }
    t_->rkey_release(rk);
    t_->dereg_mr(lb_.server_ctx, mr);
  }
  if (good)
    r_.ok(lb_.id("access"), "a put without remote write and a get without remote read end REMOTE");
}

// Where the table offers them, iput_v and iget_v (both or neither): scattered pieces through
// registered local buffers, byte-exact; zero pieces; a list with one piece past the region's end
// refused, no byte of the region or its guards touched.
void RmaCheck::vectored() {
  const bool has_put = HMC_ABI_HAS_FIELD(t_, hmc_net_plugin_v2_t, iput_v) && t_->iput_v;
  const bool has_get = HMC_ABI_HAS_FIELD(t_, hmc_net_plugin_v2_t, iget_v) && t_->iget_v;
  if (!has_put && !has_get) return;
  if (has_put != has_get) {
    r_.fail(lb_.id("vectored"), rule::kVectored, "the table offers %s without %s",
            has_put ? "iput_v" : "iget_v", has_put ? "iget_v" : "iput_v");
    return;
  }
  constexpr size_t kAt = 30000;  // region offsets from here on, clear of put() and get()
  struct Piece {
    size_t local, remote, len;
  };
  // Out of address order on both sides, one byte among them.
  const Piece pieces[] = {{0, 9000, 1000}, {1000, 100, 1}, {1500, 4000, 2000}};
  std::vector<hmc_net_iov_t> put_iov, get_iov;
  for (const Piece& p : pieces) {
    put_iov.push_back({src_.data() + p.local, p.len, src_.mr(), base_ + kAt + p.remote});
    get_iov.push_back({dst_.data() + p.local, p.len, dst_.mr(), base_ + kAt + p.remote});
  }
  fill_pattern(src_.data(), 3500, 15);
  hmc_net_request_t* q = nullptr;
  int p = t_->iput_v(lb_.client, put_iov.data(), put_iov.size(), rk_, &q);
  int st = finish(p, q, "vectored");
  if (st == HMC_PLUGIN_IN_PROGRESS) return;
  bool placed = st == HMC_PLUGIN_SUCCESS;
  for (const Piece& pc : pieces)
    placed = placed && std::memcmp(region_ + kAt + pc.remote, src_.data() + pc.local, pc.len) == 0;
  if (!placed) {
    r_.fail(lb_.id("vectored"), rule::kVectored,
            "a vectored put of 3 pieces %s %s, or its pieces are not in place at the target",
            p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused with", status_name(st));
    return;
  }
  std::memset(dst_.data(), 0, dst_.size());
  q = nullptr;
  p = t_->iget_v(lb_.client, get_iov.data(), get_iov.size(), rk_, &q);
  st = finish(p, q, "vectored");
  if (st == HMC_PLUGIN_IN_PROGRESS) return;
  placed = st == HMC_PLUGIN_SUCCESS;
  for (const Piece& pc : pieces)
    placed = placed && std::memcmp(dst_.data() + pc.local, src_.data() + pc.local, pc.len) == 0;
  if (!placed) {
    r_.fail(lb_.id("vectored"), rule::kVectored,
            "a vectored get of 3 pieces %s %s, or its pieces are not in place",
            p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused with", status_name(st));
    return;
  }
  for (bool put : {true, false}) {
    q = nullptr;
    p = put ? t_->iput_v(lb_.client, nullptr, 0, rk_, &q)
            : t_->iget_v(lb_.client, nullptr, 0, rk_, &q);
    st = finish(p, q, "vectored");
    if (st != HMC_PLUGIN_SUCCESS) {
      if (st != HMC_PLUGIN_IN_PROGRESS)
        r_.fail(lb_.id("vectored"), rule::kVectored, "a vectored %s of no pieces %s %s",
                put ? "put" : "get", p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused with",
                status_name(st));
      return;
    }
  }
  fill_pattern(src_.data(), 3500, 16);
  const std::vector<unsigned char> before(target_);
  put_iov[1].remote_addr = base_ + kRegion - 16;
  put_iov[1].len = 64;
  {
    ExpectedErrors quiet;
    q = nullptr;
    p = t_->iput_v(lb_.client, put_iov.data(), put_iov.size(), rk_, &q);
    st = finish(p, q, "vectored");
  }
  if (st == HMC_PLUGIN_IN_PROGRESS) return;
  if (st != HMC_PLUGIN_ERR_REMOTE || before != target_) {
    r_.fail(lb_.id("vectored"), rule::kVectored,
            "a vectored put with one piece across the region's end %s %s%s",
            p == HMC_PLUGIN_SUCCESS ? "ended with" : "was refused with", status_name(st),
            before != target_ ? ", and changed the target's memory" : "");
    return;
  }
  r_.ok(lb_.id("vectored"),
        "3 scattered pieces put and got back byte-exact, no pieces, and a "
        "piece past the end refusing the list");
}

void RmaCheck::release() {
  if (rk_ != nullptr) {
    int st = t_->rkey_release(rk_);
    if (st != HMC_PLUGIN_SUCCESS)
      r_.fail(lb_.id("release"), rule::kRegister, "rkey_release returned %s", status_name(st));
  }
  int st = t_->dereg_mr(lb_.server_ctx, region_mr_);
  if (st != HMC_PLUGIN_SUCCESS)
    r_.fail(lb_.id("release"), rule::kRegister, "dereg_mr returned %s", status_name(st));
}

}  // namespace

void check_rma(Loopback& lb) {
  RmaCheck(lb).run();
}

}  // namespace hmc::check

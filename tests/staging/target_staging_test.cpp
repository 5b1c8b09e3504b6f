// One-sided put and get into a peer's registered DEVICE memory, two processes on emulated
// runtimes, over hoststage's TCP and shared-memory paths: by target-side staging (the owner's
// progress engine moves the bytes with framed transfers into and out of its region; dma-buf
// registration off, HMC_NET_DMABUF=0), and device-direct (the region registered with the net
// device through a dma-buf of the emulated memory, which hoststage maps), with the per-region
// fallback to staging where the runtime exports no dma-buf.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include "two_process.h"

namespace {

using namespace staging_test;

hmc_status_t put_wait(hmc_peer_t peer, const void* buf, size_t size, hmc_remote_t r, uint64_t off,
                      uint32_t flags = 0, uint64_t value = 0) {
  hmc_request_t q;
  hmc_status_t st = hmc_put(peer, buf, size, r, off, flags, value, &q);
  return st == HMC_SUCCESS ? hmc_request_wait(q, kTimeoutMs, nullptr) : st;
}
hmc_status_t get_wait(hmc_peer_t peer, void* buf, size_t size, hmc_remote_t r, uint64_t off,
                      size_t* got) {
  hmc_request_t q;
  hmc_status_t st = hmc_get(peer, buf, size, r, off, &q);
  return st == HMC_SUCCESS ? hmc_request_wait(q, kTimeoutMs, got) : st;
}
constexpr uint8_t kUntouched = 0x5a;

// Allocates `size` bytes of `mem` filled with kUntouched, registers them and sends their
// descriptor on tag 7.
std::string export_region(hmc_context_t ctx, hmc_peer_t peer, const char* mem, size_t size,
                          uint32_t access, void** dev, hmc_region_t* reg, uint64_t tag = 7) {
  CHECK_OK(hmc_mem_alloc(ctx, mem, size, dev));
  std::vector<uint8_t> host(size, kUntouched);
  CHECK_OK(hmc_mem_copy(ctx, *dev, host.data(), size));
  return export_memory(ctx, peer, *dev, size, access, reg, tag);
}

// The initiator's start: the target's region (tag 7) imported, `size` bytes of its own `mem`.
std::string import_with_source(hmc_context_t ctx, hmc_peer_t peer, const char* mem, size_t size,
                               hmc_remote_t* remote, void** src) {
  STEP(import_region(peer, remote));
  CHECK_OK(hmc_mem_alloc(ctx, mem, size, src));
  return "";
}

std::vector<uint8_t> read_back(hmc_context_t ctx, const void* dev, size_t size) {
  std::vector<uint8_t> host(size);
  if (hmc_mem_copy(ctx, host.data(), dev, size) != HMC_SUCCESS) host.clear();
  return host;
}

// ---- byte-exact put and get, both roles, both paths --------------------------------------------

struct Segment {
  size_t offset, size;
};
// Sizes: 1 byte, the first piece and one past it, one past a chunk, several MiB that are not a
// multiple of the chunk; 3-byte gaps between them stay untouched.
const size_t kRegionSize = 3 * 1024 * 1024 + 12345;
std::vector<Segment> segments() {
  std::vector<Segment> v;
  size_t off = 5;
  for (size_t s : {size_t(1), kFirst, kFirst + 1, kChunk + 1, size_t(2 * 1024 * 1024 + 7)}) {
    v.push_back({off, s});
    off += s + 3;
  }
  return v;
}

std::string put_get_target(hmc_context_t ctx, hmc_peer_t peer, const char* mem) {
  void* dev;
  hmc_region_t reg;
  STEP(export_region(ctx, peer, mem, kRegionSize, HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE,
                     &dev, &reg));
  STEP(step_recv(peer, 8));  // the puts ended
  std::vector<uint8_t> got = read_back(ctx, dev, kRegionSize);
  CHECK_TRUE(got.size() == kRegionSize, "reading the region back failed");
  uint8_t verdict = 0;
  size_t at = 0;
  auto segs = segments();
  for (size_t k = 0; k < segs.size(); ++k) {
    for (; at < segs[k].offset; ++at)
      if (got[at] != kUntouched) verdict |= 1;  // a byte outside every put changed
    for (size_t i = 0; i < segs[k].size; ++i, ++at)
      if (got[at] != pattern(i, segs[k].size, int(k))) verdict |= 2;
  }
  for (; at < kRegionSize; ++at)
    if (got[at] != kUntouched) verdict |= 1;
  STEP(step_send(peer, 9, verdict));
  STEP(step_recv(peer, 10));  // the gets ended
  CHECK_OK(hmc_mem_deregister(reg));
  CHECK_OK(hmc_mem_free(ctx, dev));
  return "";
}

// register_local: src and dst are registered too, so that (where the path takes dma-bufs) they are
// read and written device-direct on this side as well.
std::string put_get_initiator_with(hmc_context_t ctx, hmc_peer_t peer, const char* mem,
                                   bool register_local) {
  hmc_remote_t remote;
  STEP(import_region(peer, &remote));
  auto segs = segments();
  void *src, *dst;
  size_t max = segs.back().size;
  CHECK_OK(hmc_mem_alloc(ctx, mem, max, &src));
  CHECK_OK(hmc_mem_alloc(ctx, mem, max, &dst));
  hmc_region_t src_reg = nullptr, dst_reg = nullptr;
  if (register_local) {
    CHECK_OK(hmc_mem_register(ctx, src, max, 0, &src_reg));
    CHECK_OK(hmc_mem_register(ctx, dst, max, 0, &dst_reg));
  }
  for (size_t k = 0; k < segs.size(); ++k) {
    CHECK_TRUE(fill(ctx, src, segs[k].size, int(k)), "fill failed");
    auto t0 = std::chrono::steady_clock::now();
    CHECK_OK(put_wait(peer, src, segs[k].size, remote, segs[k].offset));
    if (getenv("STAGED_TEST_LOG"))
      fprintf(
          stderr, "%s: put of %zu bytes: %.0f us\n", mem, segs[k].size,
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  STEP(step_send(peer, 8));
  uint8_t verdict = 0xff;
  STEP(step_recv(peer, 9, &verdict));
  CHECK_TRUE(verdict == 0, "the target found its region wrong: verdict " + std::to_string(verdict) +
                               " (1: bytes outside the puts, 2: bytes put)");
  for (size_t k = 0; k < segs.size(); ++k) {
    size_t got = 0;
    CHECK_OK(get_wait(peer, dst, segs[k].size, remote, segs[k].offset, &got));
    CHECK_TRUE(got == segs[k].size,
               "get of " + std::to_string(segs[k].size) + " bytes returned " + std::to_string(got));
    long bad = check(ctx, dst, segs[k].size, int(k));
    CHECK_TRUE(bad == -1,
               "get of segment " + std::to_string(k) + " differs at byte " + std::to_string(bad));
  }
  STEP(step_send(peer, 10));
  CHECK_OK(hmc_remote_release(remote));
  if (src_reg) CHECK_OK(hmc_mem_deregister(src_reg));
  if (dst_reg) CHECK_OK(hmc_mem_deregister(dst_reg));
  hmc_mem_free(ctx, src);
  hmc_mem_free(ctx, dst);
  return "";
}

std::string put_get_initiator(hmc_context_t ctx, hmc_peer_t peer, const char* mem) {
  return put_get_initiator_with(ctx, peer, mem, false);
}

struct Case {
  const char* parent_mem;  // the parent is always the initiator...
  const char* child_mem;   // ...and the child the target, unless swapped
  const char* path;
  bool child_initiates;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.child_initiates ? c.child_mem : c.parent_mem) << " -> "
      << (c.child_initiates ? c.parent_mem : c.child_mem) << " over " << c.path;
}
// Target-side staging is what these tests check: device memory is not registered by dma-buf.
class TargetStagingEnv : public testing::Environment {
 public:
  void SetUp() override { setenv("HMC_NET_DMABUF", "0", 1); }
};
const auto* const g_target_staging_env = testing::AddGlobalTestEnvironment(new TargetStagingEnv);

class TargetStaging : public testing::TestWithParam<Case> {};

TEST_P(TargetStaging, PutAndGetIntoPeerDeviceMemoryByteExact) {
  const Case& c = GetParam();
  if (c.child_initiates)
    run_roles(c.path, c.parent_mem, c.child_mem, put_get_initiator, put_get_target);
  else
    run_roles(c.path, c.parent_mem, c.child_mem, put_get_target, put_get_initiator);
}

INSTANTIATE_TEST_SUITE_P(Pairs, TargetStaging,
                         testing::Values(Case{"cuda:0", "hip:0", "hoststage/tcp", false},
                                         Case{"cuda:0", "hip:0", "hoststage/shm", false},
                                         Case{"cuda:0", "hip:0", "hoststage/tcp", true},
                                         Case{"cuda:0", "cuda:0", "hoststage/shm", false},
                                         Case{"cuda:0", "cuda:0", "hoststage/tcp", true}),
                         [](const testing::TestParamInfo<Case>& info) {
                           std::string n =
                               std::string(info.param.child_initiates ? info.param.child_mem
                                                                      : info.param.parent_mem) +
                               "_to_" +
                               (info.param.child_initiates ? info.param.parent_mem
                                                           : info.param.child_mem) +
                               "_" + info.param.path;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The target's two regions in the notification scenarios, both remote-writable: `size` bytes of
// its device memory (descriptor on tag 7) and `host_size` bytes of host memory (tag 6).
struct TargetRegions {
  void* dev = nullptr;
  std::vector<uint8_t> host;
  hmc_region_t dev_reg = nullptr, host_reg = nullptr;

  std::string export_both(hmc_context_t ctx, hmc_peer_t peer, const char* mem, size_t size,
                          size_t host_size) {
    STEP(export_region(ctx, peer, mem, size, HMC_ACCESS_REMOTE_WRITE, &dev, &dev_reg, 7));
    host.assign(host_size, kUntouched);
    return export_memory(ctx, peer, host.data(), host.size(), HMC_ACCESS_REMOTE_WRITE, &host_reg,
                         6);
  }
  // Once every check held: tells the initiator (tag 8), then withdraws both regions.
  std::string release(hmc_context_t ctx, hmc_peer_t peer) {
    STEP(step_send(peer, 8));
    CHECK_OK(hmc_mem_deregister(host_reg));
    CHECK_OK(hmc_mem_deregister(dev_reg));
    hmc_mem_free(ctx, dev);
    return "";
  }
};

// The initiator's handles of those regions.
struct InitiatorRemotes {
  hmc_remote_t dev = nullptr, host = nullptr;

  std::string import_both(hmc_peer_t peer) {
    STEP(import_region(peer, &dev, 7));
    return import_region(peer, &host, 6);
  }
  // Waits for the target's word that its checks held (tag 8), then releases both handles.
  std::string release(hmc_peer_t peer) {
    STEP(step_recv(peer, 8));
    hmc_remote_release(dev);
    hmc_remote_release(host);
    return "";
  }
};

// Scenarios run over each host-only path: run() runs the target in the peer (hip:0) and the
// initiator here (cuda:0).
class TargetStagingOverPath : public testing::TestWithParam<const char*> {
 protected:
  void run(const Role& target, const Role& initiator, const EnvList& target_env = {},
           bool target_killed = false) {
    run_roles(GetParam(), "cuda:0", "hip:0", target, initiator, target_env, target_killed);
  }
};

// ---- notification: after the data, in order with a put into host memory ------------------------

TEST_P(TargetStagingOverPath, NotificationFollowsTheDataInOrderWithAHostRegionPut) {
  const size_t size = 2 * kChunk + 99;
  run(
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        TargetRegions r;
        STEP(r.export_both(ctx, peer, mem, size, 64));
        hmc_notification_t n;
        CHECK_OK(hmc_notify_wait(ctx, kTimeoutMs, &n));
        CHECK_TRUE(n.value == 1, "first notification " + std::to_string(n.value) + ", not 1");
        long bad = check(ctx, r.dev, size, 3);  // the device put's bytes are all in place
        CHECK_TRUE(bad == -1, "notified before the data: byte " + std::to_string(bad) + " differs");
        CHECK_OK(hmc_notify_wait(ctx, kTimeoutMs, &n));
        CHECK_TRUE(n.value == 2, "second notification " + std::to_string(n.value) + ", not 2");
        CHECK_TRUE(r.host[3] == 0xc3, "the host put's byte is not in place");
        return r.release(ctx, peer);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        InitiatorRemotes remote;
        STEP(remote.import_both(peer));
        void* src;
        CHECK_OK(hmc_mem_alloc(ctx, mem, size, &src));
        CHECK_TRUE(fill(ctx, src, size, 3), "fill failed");
        uint8_t b = 0xc3;
        hmc_request_t q1, q2;
        CHECK_OK(hmc_put(peer, src, size, remote.dev, 0, HMC_PUT_NOTIFY, 1, &q1));
        CHECK_OK(hmc_put(peer, &b, 1, remote.host, 3, HMC_PUT_NOTIFY, 2, &q2));
        CHECK_OK(hmc_request_wait(q2, kTimeoutMs, nullptr));
        CHECK_OK(hmc_request_wait(q1, kTimeoutMs, nullptr));
        STEP(remote.release(peer));
        hmc_mem_free(ctx, src);
        return "";
      });
}

// ---- transfer lists: many ranges of the peer's staged device memory in one request ------------

// Blocks scattered over the peer's hip:0 region written from our cuda:0 memory by one list
// (notified after the last byte), then read back by another list in a different order; the
// target checks every block and that nothing between them changed.
TEST_P(TargetStagingOverPath, TransferListsWriteAndReadPeerDeviceMemoryByRanges) {
  const size_t block = kChunk / 3 + 7, blocks = 9, region = 2 * block * blocks + 11;
  std::vector<hmc_xfer_desc_t> writes, reads;
  for (size_t k = 0; k < blocks; ++k)  // every other slot of the region, in shuffled order
    writes.push_back({k * block, 5 + 2 * ((k * 4) % blocks) * block, block});
  for (size_t k = 0; k < blocks; ++k)
    reads.push_back({(blocks - 1 - k) * block, writes[k].remote_offset, block});
  run(
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        void* dev;
        hmc_region_t reg;
        STEP(export_region(ctx, peer, mem, region, HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE,
                           &dev, &reg));
        hmc_notification_t n;
        CHECK_OK(hmc_notify_wait(ctx, kTimeoutMs, &n));
        CHECK_TRUE(n.value == 77, "notification " + std::to_string(n.value) + ", not 77");
        std::vector<uint8_t> got = read_back(ctx, dev, region);
        CHECK_TRUE(got.size() == region, "reading the region back failed");
        std::vector<uint8_t> want(region, kUntouched);
        for (const auto& d : writes)
          for (size_t j = 0; j < d.size; ++j)
            want[d.remote_offset + j] = pattern(d.local_offset + j, block * blocks, 4);
        CHECK_TRUE(got == want, "the region after the list differs from what it wrote");
        STEP(step_send(peer, 8));
        STEP(step_recv(peer, 9));  // the read is done
        CHECK_OK(hmc_mem_deregister(reg));
        hmc_mem_free(ctx, dev);
        return "";
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        hmc_remote_t remote;
        STEP(import_region(peer, &remote));
        const size_t size = block * blocks;
        void *src, *dst;
        CHECK_OK(hmc_mem_alloc(ctx, mem, size, &src));
        CHECK_OK(hmc_mem_alloc(ctx, mem, size, &dst));
        CHECK_TRUE(fill(ctx, src, size, 4), "fill failed");
        hmc_region_t sreg, dreg;
        CHECK_OK(hmc_mem_register(ctx, src, size, 0, &sreg));
        CHECK_OK(hmc_mem_register(ctx, dst, size, 0, &dreg));
        hmc_xfer_list_t list;
        hmc_request_t r;
        size_t got = 0;
        CHECK_OK(
            hmc_xfer_prepare(sreg, remote, HMC_XFER_WRITE, writes.data(), writes.size(), &list));
        CHECK_OK(hmc_xfer_post(list, HMC_XFER_NOTIFY, 77, &r));
        CHECK_OK(hmc_request_wait(r, kTimeoutMs, &got));
        CHECK_TRUE(got == size, "the write list moved " + std::to_string(got) + " bytes");
        CHECK_OK(hmc_xfer_release(list));
        STEP(step_recv(peer, 8));
        CHECK_OK(hmc_xfer_prepare(dreg, remote, HMC_XFER_READ, reads.data(), reads.size(), &list));
        CHECK_OK(hmc_xfer_post(list, 0, 0, &r));
        CHECK_OK(hmc_request_wait(r, kTimeoutMs, &got));
        CHECK_TRUE(got == size, "the read list moved " + std::to_string(got) + " bytes");
        CHECK_OK(hmc_xfer_release(list));
        // dst[reads[k].local] holds the block written from src[writes[k].local].
        std::vector<uint8_t> seen = read_back(ctx, dst, size), want(size);
        for (size_t k = 0; k < blocks; ++k)
          for (size_t j = 0; j < block; ++j)
            want[reads[k].local_offset + j] = pattern(writes[k].local_offset + j, size, 4);
        CHECK_TRUE(seen == want, "the blocks read back differ");
        STEP(step_send(peer, 9));
        CHECK_OK(hmc_mem_deregister(sreg));
        CHECK_OK(hmc_mem_deregister(dreg));
        hmc_remote_release(remote);
        hmc_mem_free(ctx, src);
        hmc_mem_free(ctx, dst);
        return "";
      });
}

// Puts into host memory carry their notifications with the data where the path offers it
// (hoststage does); puts into staged device memory notify on the control plane. Mixed, the
// target still sees every notification after its data and in the order of the puts: a Notify
// waits for the carried ones before it, and the initiator carries again only once its Notify
// messages were delivered.
TEST_P(TargetStagingOverPath, NotificationsKeepPutOrderAcrossBothChannels) {
  struct Put {
    bool device;  // into the staged device region, else into the host region
    size_t offset, size;
  };
  const std::vector<Put> puts = {
      {false, 0, 1u << 20},       {false, 1u << 20, 8},          {false, 2u << 20, 300000},
      {true, 0, 2 * kChunk + 99}, {false, 3u << 20, 5},          {false, 3u << 20 | 64, 70000},
      {true, 1u << 20, 1000},     {false, 3u << 20 | 200000, 1}, {false, 4u << 20, 0}};
  const size_t region = 5u << 20;
  std::string log = testing::TempDir() + "hmc-notify-order-" + std::to_string(getpid()) + ".log";
  unlink(log.c_str());
  run(
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        TargetRegions r;
        STEP(r.export_both(ctx, peer, mem, region, region));
        for (size_t i = 0; i < puts.size(); ++i) {
          hmc_notification_t n;
          CHECK_OK(hmc_notify_wait(ctx, kTimeoutMs, &n));
          CHECK_TRUE(n.value == i + 1, "notification " + std::to_string(n.value) + " came " +
                                           std::to_string(i + 1) + "th");
          const Put& p = puts[i];
          const uint8_t* base = p.device ? static_cast<uint8_t*>(r.dev) : r.host.data();
          long bad = check(ctx, base + p.offset, p.size, int(i));
          CHECK_TRUE(bad == -1, "notification " + std::to_string(i + 1) +
                                    " came before its data: byte " + std::to_string(bad));
        }
        return r.release(ctx, peer);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        InitiatorRemotes remote;
        STEP(remote.import_both(peer));
        std::vector<void*> srcs;
        std::vector<hmc_request_t> reqs;
        for (size_t i = 0; i < puts.size(); ++i) {
          const Put& p = puts[i];
          void* src;
          CHECK_OK(hmc_mem_alloc(ctx, p.device ? mem : "host", std::max<size_t>(p.size, 1), &src));
          srcs.push_back(src);
          CHECK_TRUE(fill(ctx, src, p.size, int(i)), "fill failed");
          hmc_request_t q;
          CHECK_OK(hmc_put(peer, src, p.size, p.device ? remote.dev : remote.host, p.offset,
                           HMC_PUT_NOTIFY, i + 1, &q));
          reqs.push_back(q);
        }
        for (hmc_request_t q : reqs) CHECK_OK(hmc_request_wait(q, kTimeoutMs, nullptr));
        STEP(remote.release(peer));
        for (void* src : srcs) hmc_mem_free(ctx, src);
        return "";
      },
      {{"HMC_LOG_FILE", log.c_str()}, {"HMC_LOG_LEVEL", "info"}});
  std::string text = read_text(log);
  unlink(log.c_str());
  EXPECT_NE(text.find("put notifications travel with the data"), std::string::npos)
      << "the path did not carry notifications:\n"
      << text;
}

// ---- refusals: access not granted, out of bounds; nothing lands --------------------------------

// The target's memory (hip:0 or cuda:0; cuda:0 here) by the path.
class TargetStagingRefusals : public testing::TestWithParam<std::tuple<std::string, std::string>> {
};

TEST_P(TargetStagingRefusals, RefusedAccessLeavesTheRegionUntouchedAndTheStreamInStep) {
  const size_t size = 3 * kChunk + 17;
  const char* child_mem = std::get<0>(GetParam()).c_str();
  const char* path = std::get<1>(GetParam()).c_str();
  run_roles(
      path, "cuda:0", child_mem,
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        void *ro, *wo;
        hmc_region_t roreg, woreg;
        STEP(export_region(ctx, peer, mem, size, HMC_ACCESS_REMOTE_READ, &ro, &roreg, 7));
        STEP(export_region(ctx, peer, mem, size, HMC_ACCESS_REMOTE_WRITE, &wo, &woreg, 6));
        STEP(step_recv(peer, 8));
        std::vector<uint8_t> a = read_back(ctx, ro, size);
        CHECK_TRUE(a.size() == size && std::count(a.begin(), a.end(), kUntouched) == long(size),
                   "a refused put changed the read-only region");
        long bad = check(ctx, wo, size, 4);  // the accepted put after the refusals
        CHECK_TRUE(bad == -1, "the put after the refusals differs at byte " + std::to_string(bad));
        STEP(step_send(peer, 9));
        CHECK_OK(hmc_mem_deregister(roreg));
        CHECK_OK(hmc_mem_deregister(woreg));
        hmc_mem_free(ctx, ro);
        hmc_mem_free(ctx, wo);
        return "";
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        hmc_remote_t ro, wo;
        STEP(import_region(peer, &ro, 7));
        STEP(import_region(peer, &wo, 6));
        void *src, *dst;
        CHECK_OK(hmc_mem_alloc(ctx, mem, size, &src));
        CHECK_OK(hmc_mem_alloc(ctx, mem, size, &dst));
        CHECK_TRUE(fill(ctx, src, size, 4), "fill failed");
        // Refused by the owner: no remote write / read granted; small and multi-piece.
        hmc_status_t st = put_wait(peer, src, size, ro, 0);
        CHECK_TRUE(st == HMC_ERR_REMOTE,
                   std::string("put into a read-only region: ") + hmc_status_string(st));
        CHECK_TRUE(
            std::string(hmc_last_error()).find("does not grant remote write") != std::string::npos,
            std::string("refusal text: ") + hmc_last_error());
        st = put_wait(peer, src, 10, ro, 0, HMC_PUT_NOTIFY, 5);
        CHECK_TRUE(st == HMC_ERR_REMOTE, "small put into a read-only region");
        size_t got = 0;
        st = get_wait(peer, dst, size, wo, 0, &got);
        CHECK_TRUE(st == HMC_ERR_REMOTE,
                   std::string("get from a write-only region: ") + hmc_status_string(st));
        // Out of bounds: refused before anything moves.
        hmc_request_t q;
        CHECK_TRUE(hmc_put(peer, src, size, wo, 1, 0, 0, &q) == HMC_ERR_OUT_OF_BOUNDS,
                   "put past the region's end");
        CHECK_TRUE(hmc_get(peer, dst, 2, wo, size - 1, &q) == HMC_ERR_OUT_OF_BOUNDS,
                   "get past the region's end");
        // The next transfers go through.
        CHECK_OK(put_wait(peer, src, size, wo, 0));
        CHECK_OK(get_wait(peer, dst, size, ro, 0, &got));
        std::vector<uint8_t> a = read_back(ctx, dst, size);
        CHECK_TRUE(got == size && std::count(a.begin(), a.end(), kUntouched) == long(size),
                   "get from the read-only region");
        STEP(step_send(peer, 8));
        STEP(step_recv(peer, 9));
        hmc_remote_release(ro);
        hmc_remote_release(wo);
        hmc_mem_free(ctx, src);
        hmc_mem_free(ctx, dst);
        return "";
      });
}

INSTANTIATE_TEST_SUITE_P(TargetsAndPaths, TargetStagingRefusals,
                         testing::Combine(testing::Values("hip:0", "cuda:0"),
                                          testing::Values(kHostPaths[0], kHostPaths[1])),
                         [](const testing::TestParamInfo<TargetStagingRefusals::ParamType>& info) {
                           std::string mem = std::get<0>(info.param);
                           std::string path = std::get<1>(info.param);
                           return mem.substr(0, mem.find(':')) + "_" +
                                  path.substr(path.find('/') + 1);
                         });

// ---- deregistration while staged puts run ------------------------------------------------------

TEST(TargetStagingScenarios, DeregistrationWaitsForStagedPutsThenRefusesLaterOnes) {
  constexpr int kPuts = 8;
  const size_t piece = kChunk + 1000, size = kPuts * piece;
  run_roles(
      "hoststage/tcp", "cuda:0", "hip:0",
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        void* dev;
        hmc_region_t reg;
        STEP(export_region(ctx, peer, mem, size, HMC_ACCESS_REMOTE_WRITE, &dev, &reg));
        STEP(step_recv(peer, 8));  // the puts are posted
        CHECK_OK(hmc_mem_deregister(reg));
        std::vector<uint8_t> after = read_back(ctx, dev, size);
        STEP(step_send(peer, 9));  // deregistered
        uint8_t mask = 0;
        STEP(step_recv(peer, 10, &mask));  // which puts succeeded; the late one was refused
        std::vector<uint8_t> later = read_back(ctx, dev, size);
        CHECK_TRUE(after == later, "bytes landed after hmc_mem_deregister returned");
        for (int k = 0; k < kPuts; ++k) {
          bool done = true, untouched = true;
          for (size_t i = 0; i < piece; ++i) {
            done &= after[k * piece + i] == pattern(i, piece, k);
            untouched &= after[k * piece + i] == kUntouched;
          }
          bool ok = (mask >> k) & 1;
          CHECK_TRUE(ok ? done : untouched, "put " + std::to_string(k) +
                                                (ok ? " succeeded but its "
                                                      "bytes are not all in place"
                                                    : " was refused but its bytes changed"));
        }
        hmc_mem_free(ctx, dev);
        return "";
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        hmc_remote_t remote;
        void* src;
        STEP(import_with_source(ctx, peer, mem, size, &remote, &src));
        hmc_request_t q[kPuts];
        for (int k = 0; k < kPuts; ++k) {
          CHECK_TRUE(fill(ctx, static_cast<uint8_t*>(src) + k * piece, piece, k), "fill failed");
        }
        for (int k = 0; k < kPuts; ++k)
          CHECK_OK(hmc_put(peer, static_cast<uint8_t*>(src) + k * piece, piece, remote, k * piece,
                           0, 0, &q[k]));
        STEP(step_send(peer, 8));
        STEP(step_recv(peer, 9));
        // The withdrawal waited for every put: all have ended by now.
        uint8_t mask = 0;
        for (int k = 0; k < kPuts; ++k) {
          hmc_status_t st = hmc_request_test(q[k], nullptr);
          CHECK_TRUE(st == HMC_SUCCESS || st == HMC_ERR_REMOTE,
                     "put " + std::to_string(k) + " after the deregistration: " +
                         hmc_status_string(st) + " " + hmc_last_error());
          if (st == HMC_SUCCESS) mask |= uint8_t(1u << k);
        }
        hmc_request_t late;
        hmc_status_t st = hmc_put(peer, src, piece, remote, 0, 0, 0, &late);
        if (st == HMC_SUCCESS) st = hmc_request_wait(late, kTimeoutMs, nullptr);
        CHECK_TRUE(st == HMC_ERR_REMOTE,
                   std::string("put after the deregistration: ") + hmc_status_string(st));
        STEP(step_send(peer, 10, mask));
        if (getenv("STAGED_TEST_LOG")) fprintf(stderr, "puts that landed: mask 0x%02x\n", mask);
        hmc_remote_release(remote);
        hmc_mem_free(ctx, src);
        return "";
      },
      // The target's copies run at 100 MB/s: the puts are still running when it deregisters.
      {{"FAKEGPU_BANDWIDTH_MBPS", "100"}});
}

// ---- the target dies mid put -------------------------------------------------------------------

TEST_P(TargetStagingOverPath, TargetKilledMidStagedPutEndsItWithPeerLost) {
  const size_t size = 8 * 1024 * 1024 + 5;
  run(
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        void* dev;
        hmc_region_t reg;
        STEP(export_region(ctx, peer, mem, size, HMC_ACCESS_REMOTE_WRITE, &dev, &reg));
        STEP(step_recv(peer, 8));  // the put is posted: die while it runs (slow copies)
        raise(SIGKILL);
        return "not killed";
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        hmc_remote_t remote;
        void* src;
        STEP(import_with_source(ctx, peer, mem, size, &remote, &src));
        hmc_request_t q;
        CHECK_OK(hmc_put(peer, src, size, remote, 0, HMC_PUT_NOTIFY, 1, &q));
        auto t0 = std::chrono::steady_clock::now();
        STEP(step_send(peer, 8));
        hmc_status_t st = hmc_request_wait(q, kTimeoutMs, nullptr);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK_TRUE(st == HMC_ERR_PEER_LOST, std::string("the put ended with ") +
                                                hmc_status_string(st) + ": " + hmc_last_error());
        CHECK_TRUE(s < 5.0, "the put took " + std::to_string(s) + " s to end");
        hmc_remote_release(remote);
        hmc_mem_free(ctx, src);
        return "";
      },
      // The target's copies run at 100 MB/s: the 8 MiB put cannot be done when it dies.
      {{"FAKEGPU_BANDWIDTH_MBPS", "100"}}, true);
}

INSTANTIATE_TEST_SUITE_P(HostPaths, TargetStagingOverPath, testing::ValuesIn(kHostPaths),
                         path_name);

}  // namespace

namespace {
using namespace staging_test;

// ---- the initiator dies mid put: the target's transfer ends, its deregistration is prompt ------

TEST(TargetStagingScenarios, InitiatorKilledMidStagedPutLetsTheTargetDeregisterPromptly) {
  const size_t size = 8 * 1024 * 1024 + 5;
  run_roles(
      "hoststage/tcp", "cuda:0", "hip:0",
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        hmc_remote_t remote;
        void* src;
        STEP(import_with_source(ctx, peer, mem, size, &remote, &src));
        hmc_request_t q;
        CHECK_OK(hmc_put(peer, src, size, remote, 0, 0, 0, &q));
        STEP(step_send(peer, 8));  // the put is posted
        // Die while it runs (slow copies), once the target heard: a step still in flight when
        // the process dies is lost with it (the peer is lost, not closed in order).
        STEP(step_recv(peer, 9));
        raise(SIGKILL);
        return "not killed";
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char* mem) -> std::string {
        void* dev;
        hmc_region_t reg;
        STEP(export_region(ctx, peer, mem, size, HMC_ACCESS_REMOTE_WRITE, &dev, &reg));
        STEP(step_recv(peer, 8));
        STEP(step_send(peer, 9));  // the initiator dies now, its put running
        auto t0 = std::chrono::steady_clock::now();
        CHECK_OK(hmc_mem_deregister(reg));
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK_TRUE(s < 5.0, "hmc_mem_deregister took " + std::to_string(s) + " s");
        hmc_mem_free(ctx, dev);
        return "";
      },
      // The initiator's copies run at 20 MB/s: the 8 MiB put cannot be done when it dies.
      {{"FAKEGPU_BANDWIDTH_MBPS", "20"}}, true);
}

// ---- device-direct: the region registered with the net device by dma-buf ----------------------

struct DirectCase {
  const char* initiator_mem;  // the parent
  const char* target_mem;     // the child, which owns the region
  const char* path;
  bool target_exports_dmabuf;  // else its runtime has no dma-buf export: the region is staged
};
void PrintTo(const DirectCase& c, std::ostream* os) {
  *os << c.initiator_mem << " -> " << c.target_mem << " over " << c.path
      << (c.target_exports_dmabuf ? "" : ", target without dma-buf export");
}
class DmabufDirect : public testing::TestWithParam<DirectCase> {};

TEST_P(DmabufDirect, PutAndGetByteExactDirectOrFallingBackPerRegion) {
  const DirectCase& c = GetParam();
  setenv("HMC_NET_DMABUF", "1", 1);
  std::string log = testing::TempDir() + "hmc-dmabuf-target-" + std::to_string(getpid()) + ".log";
  unlink(log.c_str());
  std::string nodmabuf_lib =
      std::string(FAKEGPU_DIR) + "/" + vendor_of(c.target_mem) + "-nodmabuf/libcuda.so.1";
  EnvList env = {{"HMC_LOG_FILE", log.c_str()}, {"HMC_LOG_LEVEL", "info"}};
  if (!c.target_exports_dmabuf) env.push_back({"HMC_CUDA_LIBRARY", nodmabuf_lib.c_str()});
  // Both sides register their device memory: the initiator's buffers go direct on its side too.
  run_roles(
      c.path, c.initiator_mem, c.target_mem, put_get_target,
      [](hmc_context_t ctx, hmc_peer_t peer, const char* mem) {
        return put_get_initiator_with(ctx, peer, mem, true);
      },
      env);
  setenv("HMC_NET_DMABUF", "0", 1);
  // The target's registration of the region says how it is reached: "direct on <devices>" or
  // "staged for <device> (<why>)", one line.
  std::string line, text = read_text(log);
  unlink(log.c_str());
  std::istringstream lines(text);
  while (std::getline(lines, line))
    if (line.find(std::string("hmc_mem_register: ") + std::to_string(kRegionSize)) !=
        std::string::npos)
      break;
  const std::string direct = std::string("on ") + c.target_mem + ": direct on ";
  if (c.target_exports_dmabuf) {
    auto at = line.find(direct);
    ASSERT_NE(at, std::string::npos) << "no direct registration in the target's log:\n" << text;
    EXPECT_NE(line.find(c.path, at), std::string::npos) << line;
  } else {
    EXPECT_EQ(line.find(direct), std::string::npos) << line;
    EXPECT_NE(line.find(std::string("staged for ") + c.path + " (" + c.target_mem +
                        " exports no dma-buf)"),
              std::string::npos)
        << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, DmabufDirect,
                         testing::Values(DirectCase{"hip:0", "cuda:0", "hoststage/tcp", true},
                                         DirectCase{"hip:0", "cuda:0", "hoststage/shm", true},
                                         DirectCase{"cuda:0", "cuda:0", "hoststage/shm", true},
                                         DirectCase{"hip:0", "cuda:0", "hoststage/tcp", false}),
                         [](const testing::TestParamInfo<DirectCase>& info) {
                           std::string n =
                               std::string(info.param.initiator_mem) + "_to_" +
                               info.param.target_mem + "_" + info.param.path +
                               (info.param.target_exports_dmabuf ? "" : "_no_dmabuf_export");
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace

// hmc-test-peer: the other process of the integration tests.
//
//   hmc-test-peer <scenario> <parent address blob, hex> [key=value ...]
//
// Creates its own context (from the environment the test gave it), connects to the parent,
// plays the scenario (see scenarios.h) and exits 0 on success. On any failure it prints one
// line naming the step, the status and hmc_last_error() to stderr and exits 1; the test shows
// that output. Keys: parent-pid=N (die with the parent; refuse to start if it is already gone),
// progress-thread=0 (a context without progress thread), plus the scenario's own (sizes=,
// count=, size=, status=, expect-path=, release=, how=).
#include <sys/prctl.h>
#include <sys/time.h>

#include <cinttypes>
#include <map>
#include <string>
#include <vector>

#include "harness.h"
#include "scenarios.h"

namespace {

using namespace hmc_test;

std::string g_scenario = "?";

[[noreturn]] void die(const std::string& msg) {
  fprintf(stderr, "hmc-test-peer[%s, pid %d]: %s\n", g_scenario.c_str(), getpid(), msg.c_str());
  fflush(stdout);
  // _exit: the context's threads are still running; static destructors must not race them.
  _exit(1);
}

void check(bool cond, const std::string& what) {
  if (!cond) die(what);
}

void check_ok(hmc_status_t st, const std::string& what) {
  if (st != HMC_SUCCESS) die(what + ": " + describe(st));
}

void check_pattern(const void* buf, size_t size, uint64_t seed, uint64_t logical,
                   const std::string& what) {
  std::string bad = pattern_check(buf, size, seed, logical);
  if (!bad.empty()) die(what + ": " + bad);
}

struct Peer {
  hmc_context_t ctx;
  hmc_peer_t peer;
  std::map<std::string, std::string> args;

  const std::string& arg(const std::string& key) const {
    auto it = args.find(key);
    if (it == args.end()) die("missing argument " + key + "=");
    return it->second;
  }
  uint64_t arg_u64(const std::string& key) const { return strtoull(arg(key).c_str(), nullptr, 0); }

  void send_ctrl(uint64_t tag, uint64_t v) const {
    std::string err;
    if (send_u64(peer, tag, v, kOpTimeoutMs, &err) != HMC_SUCCESS)
      die("control send on tag " + std::to_string(tag) + ": " + err);
  }
  uint64_t recv_ctrl(uint64_t tag) const {
    uint64_t v = 0;
    std::string err;
    if (recv_u64(peer, tag, &v, kOpTimeoutMs, &err) != HMC_SUCCESS)
      die("control receive on tag " + std::to_string(tag) + ": " + err);
    return v;
  }
  void expect_ctrl(uint64_t tag, uint64_t want) const {
    uint64_t v = recv_ctrl(tag);
    check(v == want, "control value " + std::to_string(v) + " on tag " + std::to_string(tag) +
                         ", expected " + std::to_string(want));
  }
  void send_buf(const void* buf, size_t size, uint64_t tag) const {
    std::string err;
    if (send_wait(peer, buf, size, tag, kOpTimeoutMs, &err) != HMC_SUCCESS)
      die("send of " + std::to_string(size) + " bytes, tag " + std::to_string(tag) + ": " + err);
  }
  // Receives exactly `size` bytes on `tag` and checks them against the pattern.
  void recv_pattern(void* buf, size_t size, uint64_t tag, uint64_t seed) const {
    size_t got = 0;
    std::string err;
    if (recv_wait(peer, buf, size, tag, kOpTimeoutMs, &got, &err) != HMC_SUCCESS)
      die("receive of " + std::to_string(size) + " bytes, tag " + std::to_string(tag) + ": " + err);
    check(got == size, "receive on tag " + std::to_string(tag) + " got " + std::to_string(got) +
                           " bytes, expected " + std::to_string(size));
    check_pattern(buf, size, seed, 0, "data on tag " + std::to_string(tag));
  }
};

std::vector<size_t> parse_sizes(const std::string& text) {
  std::vector<size_t> v;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    v.push_back(strtoull(text.substr(pos, comma - pos).c_str(), nullptr, 0));
    pos = comma + 1;
  }
  return v;
}

// --- scenarios ------------------------------------------------------------------------------

void run_hello(const Peer& p) {
  hmc_peer_info_t info{};
  info.struct_size = sizeof info;
  check_ok(hmc_peer_info(p.peer, &info), "hmc_peer_info");
  printf("connected: path=%s (%s), remote_pid=%d, same_host=%d\n", info.path, info.path_reason,
         info.remote_pid, info.same_host);
  auto it = p.args.find("expect-path");
  if (it != p.args.end())
    check(it->second == info.path, "the forced path is " + it->second + " but the peer got '" +
                                       info.path + "' (" + info.path_reason + ")");
  check(info.remote_pid == getppid(), "hmc_peer_info remote_pid " +
                                          std::to_string(info.remote_pid) + ", the parent is " +
                                          std::to_string(getppid()));
  check(info.alive == 1, "hmc_peer_info alive is " + std::to_string(info.alive));
  uint64_t v = p.recv_ctrl(kTagCtrl);
  p.send_ctrl(kTagCtrl + 1, v + 1);
}

void run_echo_sizes(const Peer& p) {
  std::vector<size_t> sizes = parse_sizes(p.arg("sizes"));
  for (size_t i = 0; i < sizes.size(); ++i) {
    HostBuffer b(sizes[i]);
    check(static_cast<bool>(b), "malloc of " + std::to_string(sizes[i]) + " bytes");
    if (sizes[i] >= kPrefaultFrom) b.prefault();
    p.recv_pattern(b.data(), sizes[i], kTagData + i, kSeedParent + i);
    pattern_fill(b.data(), sizes[i], kSeedChild + i);
    p.send_buf(b.data(), sizes[i], kTagReply + i);
  }
}

void run_ordering(const Peer& p) {
  // A: the receive is posted before the parent sends (the parent waits for "ready").
  const auto& early = ordering_early_sizes();
  for (size_t i = 0; i < early.size(); ++i) {
    HostBuffer b(early[i]);
    hmc_request_t req = nullptr;
    check_ok(hmc_recv(p.peer, b.data(), early[i], kTagData + i, &req), "hmc_recv (early)");
    p.send_ctrl(kTagCtrl, i);
    size_t got = 0;
    check_ok(finish(req, kOpTimeoutMs, &got),
             "receive posted before the send, tag " + std::to_string(kTagData + i));
    check(got == early[i], "early receive got " + std::to_string(got) + " bytes");
    check_pattern(b.data(), early[i], kSeedParent + i, 0, "early receive");
  }
  // B: the parent sent every late message, then told us so; receive in another order.
  const auto& late = ordering_late_messages();
  p.expect_ctrl(kTagCtrl + 1, late.size());
  for (size_t idx : ordering_late_recv_order()) {
    HostBuffer b(late[idx].size);
    p.recv_pattern(b.data(), late[idx].size, late[idx].tag, kSeedParent + 100 + idx);
  }
  // C: the same the other way: send all, then tell the parent.
  OrderingLateSends sends(p.peer, kSeedChild + 100);
  p.send_ctrl(kTagCtrl + 2, late.size());
  for (size_t i = 0; i < sends.rq.size(); ++i) {
    const auto& r = sends.rq.wait(i, kOpTimeoutMs);
    check(r.status == HMC_SUCCESS, "late send " + std::to_string(i) + ": " + r.error);
  }
  p.expect_ctrl(kTagCtrl + 3, kCtrlDone);
}

void run_truncate(const Peer& p) {
  for (const auto& c : truncate_to_child()) {
    std::vector<uint8_t> b(c.posted + kGuard, kGuardByte);
    size_t got = 0;
    hmc_status_t st = recv_wait(p.peer, b.data(), c.posted, c.tag, kOpTimeoutMs, &got);
    check(st == HMC_ERR_TRUNCATED, "receiving " + std::to_string(c.sent) + " bytes into " +
                                       std::to_string(c.posted) +
                                       ": expected HMC_ERR_TRUNCATED, got " + describe(st));
    check(*hmc_last_error() != '\0', "HMC_ERR_TRUNCATED without a message");
    for (size_t i = c.posted; i < b.size(); ++i)
      check(b[i] == kGuardByte, "a truncated receive wrote past its buffer, at offset " +
                                    std::to_string(i) + " of a " + std::to_string(c.posted) +
                                    "-byte buffer");
  }
  p.send_ctrl(kTagCtrl, kCtrlAck);
  for (const auto& c : truncate_to_parent()) {
    HostBuffer b(c.sent);
    pattern_fill(b.data(), c.sent, kSeedChild);
    // The sender of a message that truncates at the receiver still succeeds (net.h).
    p.send_buf(b.data(), c.sent, c.tag);
  }
  // The connection still works.
  HostBuffer b(4096);
  p.recv_pattern(b.data(), 4096, kTagData + 10, kSeedParent + 10);
  p.send_ctrl(kTagCtrl + 1, kCtrlAck);
}

void run_concurrent(const Peer& p) {
  size_t n = p.arg_u64("count");
  ConcurrentExchange x(p.peer, n, kTagData, kTagReply, kSeedChild);
  for (size_t i = 0; i < x.rq.size(); ++i) {
    const auto& r = x.rq.wait(i, kOpTimeoutMs);
    std::string what = (i < n ? "receive " : "send ") + std::to_string(i % n);
    check(r.status == HMC_SUCCESS, what + ": " + r.error);
    if (i < n) {
      check(r.bytes == concurrent_size(i), what + " got " + std::to_string(r.bytes) + " bytes");
      check_pattern(x.in.data() + x.off[i], concurrent_size(i), kSeedParent + i, 0, what);
    }
  }
  p.expect_ctrl(kTagCtrl, kCtrlDone);
}

std::vector<uint8_t> pack_region(const Region& r, const std::string& what) {
  hmc_status_t st;
  std::vector<uint8_t> d = r.pack(&st);
  check_ok(st, "hmc_region_pack of " + what);
  return d;
}

// An initiator's import of the region whose descriptor the parent sends (kTagDesc).
void import_parent_region(const Peer& p, Remote* rem) {
  std::vector<uint8_t> desc;
  std::string err;
  if (recv_blob(p.peer, kTagDesc, &desc, kOpTimeoutMs, &err) != HMC_SUCCESS)
    die("receiving the parent's descriptor: " + err);
  check_ok(rem->import(p.peer, desc), "hmc_remote_import");
}

// A target's guarded region, registered for remote reads and writes, its descriptor sent to the
// parent (kTagDesc); `image` starts as its memory before anything was written.
struct TargetRegion {
  GuardedMem g;
  Region r;
  std::vector<uint8_t> image;
  TargetRegion(const Peer& p, size_t size, uint64_t seed)
      : g(size, seed), image(GuardedMem::initial_image(size, seed)) {
    check_ok(
        r.register_mem(p.ctx, g.region(), size, HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE),
        "hmc_mem_register");
    std::vector<uint8_t> desc = pack_region(r, "the region");
    p.send_buf(desc.data(), desc.size(), kTagDesc);
  }
  // At the parent's kCtrlDone: the memory is `image` (`when` says at what point), then the
  // region is deregistered and the parent told.
  void check_and_close(const Peer& p, const std::string& when) {
    p.expect_ctrl(kTagCtrl, kCtrlDone);
    std::string bad = bytes_check(g.mem.data(), image.data(), image.size());
    check(bad.empty(), "region memory " + when + ": " + bad);
    check_ok(r.deregister(), "hmc_mem_deregister");
    p.send_ctrl(kTagCtrl + 1, kCtrlAck);
  }
};

void run_rma_target(const Peer& p) {
  TargetRegion t(p, kRmaRegionSize, kRmaInitSeed);
  GuardedMem& g = t.g;
  std::vector<uint8_t>& image = t.image;
  for (const auto& op : rma_puts()) apply_op(&image, op);
  const auto& nputs = rma_notify_puts();
  // Each notification carries one of the values, once, and its put's data is in place when it
  // is seen. (Their order is the concern of the notify-initiator scenario.)
  std::vector<bool> seen(nputs.size(), false);
  for (size_t i = 0; i < nputs.size(); ++i) {
    hmc_notification_t n{};
    check_ok(hmc_notify_wait(p.ctx, kOpTimeoutMs, &n), "hmc_notify_wait #" + std::to_string(i));
    uint64_t k = n.value - kNotifyBase;
    check(k < nputs.size() && !seen[k], "notification #" + std::to_string(i) + " has value " +
                                            std::to_string(n.value) + ", not a new one of " +
                                            std::to_string(kNotifyBase) + " + [0, " +
                                            std::to_string(nputs.size()) + ")");
    seen[k] = true;
    check(n.peer == p.peer, "notification #" + std::to_string(i) + " names another peer");
    const Op& op = nputs[k];
    check_pattern(g.region() + op.offset, op.size, op.seed, op.offset,
                  "data of notified put #" + std::to_string(k) + " when its notification came");
    apply_op(&image, op);
  }
  hmc_notification_t extra{};
  hmc_status_t st = hmc_notify_wait(p.ctx, 0, &extra);
  check(st == HMC_ERR_TIMEOUT,
        "a notification nobody sent (value " + std::to_string(extra.value) + "): " + describe(st));
  t.check_and_close(p, "after the puts (region starts at offset " + std::to_string(kGuard) + ")");
}

void run_notify_initiator(const Peer& p) {
  Remote rem;
  import_parent_region(p, &rem);
  uint64_t size = 0;
  check_ok(hmc_remote_size(rem.get(), &size), "hmc_remote_size");
  check(size == notify_region_size(), "hmc_remote_size is " + std::to_string(size) +
                                          ", the parent registered " +
                                          std::to_string(notify_region_size()));
  HostBuffer src(size);
  for (size_t k = 0; k < kNotifySlots; ++k)
    pattern_fill(src.data() + notify_slot_offset(k), notify_slot_size(k), kNotifySeed + k,
                 notify_slot_offset(k));
  Requests rq;
  for (size_t k = 0; k < kNotifySlots; ++k) {
    uint64_t off = notify_slot_offset(k);
    rq.post([&](hmc_request_t* posted) {
      return hmc_put(p.peer, src.data() + off, notify_slot_size(k), rem.get(), off, HMC_PUT_NOTIFY,
                     kNotifyBase + k, posted);
    });
  }
  for (size_t k = 0; k < rq.size(); ++k) {
    const auto& r = rq.wait(k, kOpTimeoutMs);
    check(r.status == HMC_SUCCESS, "put with notify #" + std::to_string(k) + ": " + r.error);
  }
  p.expect_ctrl(kTagCtrl, kCtrlDone);
}

void run_xfer_target(const Peer& p) {
  TargetRegion t(p, kXferRegionSize, kXferInitSeed);
  GuardedMem& g = t.g;
  std::vector<uint8_t>& image = t.image;
  apply_xfer_writes(&image);
  // The write list's notification: every block is in place when it is seen.
  hmc_notification_t n{};
  check_ok(hmc_notify_wait(p.ctx, kOpTimeoutMs, &n), "hmc_notify_wait (write list)");
  check(n.value == kXferWriteNote,
        "the write list's notification has value " + std::to_string(n.value));
  std::string bad = bytes_check(g.mem.data(), image.data(), image.size());
  check(bad.empty(),
        "region memory when the write list's notification came (region starts at "
        "offset " +
            std::to_string(kGuard) + "): " + bad);
  p.send_ctrl(kTagCtrl + 1, kCtrlAck);
  check_ok(hmc_notify_wait(p.ctx, kOpTimeoutMs, &n), "hmc_notify_wait (read list)");
  check(n.value == kXferReadNote,
        "the read list's notification has value " + std::to_string(n.value));
  t.check_and_close(p, "after the lists");
}

void run_bounds_target(const Peer& p) {
  std::vector<GuardedMem> mem;
  Region regs[kBoundsRegions];
  for (int r = 0; r < kBoundsRegions; ++r) mem.emplace_back(bounds_size(r), bounds_seed(r));
  for (int r = 0; r < kBoundsRegions; ++r) {
    check_ok(regs[r].register_mem(p.ctx, mem[r].region(), bounds_size(r), bounds_access(r)),
             "hmc_mem_register of region " + std::to_string(r));
    std::vector<uint8_t> desc = pack_region(regs[r], "region " + std::to_string(r));
    p.send_buf(desc.data(), desc.size(), kTagDesc + r);
  }
  for (;;) {
    uint64_t v = p.recv_ctrl(kTagCtrl);
    if (v == kCtrlDone) break;
    check(v == kCtrlDeregister, "unexpected control value " + std::to_string(v));
    check_ok(regs[kDereg].deregister(), "hmc_mem_deregister");
    p.send_ctrl(kTagCtrl + 1, kCtrlAck);
  }
  // Every byte around and inside every region: only the good puts may have changed anything.
  for (int r = 0; r < kBoundsRegions; ++r) {
    std::vector<uint8_t> image = GuardedMem::initial_image(bounds_size(r), bounds_seed(r));
    for (const auto& gp : bounds_good_puts())
      if (gp.first == r) apply_op(&image, gp.second);
    std::string bad = bytes_check(mem[r].mem.data(), image.data(), image.size());
    check(bad.empty(), "memory of region " + std::to_string(r) + " (region bytes are offsets " +
                           std::to_string(kGuard) + ".." +
                           std::to_string(kGuard + bounds_size(r) - 1) + "): " + bad);
  }
  p.send_ctrl(kTagCtrl + 1, kCtrlAck);
}

// Puts into the parent's region, kWithdrawDepth at a time, until the parent's deregistration
// makes them fail; every put must end either landed (SUCCESS) or refused (REMOTE).
void run_withdraw_initiator(const Peer& p) {
  Remote rem;
  import_parent_region(p, &rem);
  const size_t size = kWithdrawRegionSize;
  std::vector<HostBuffer> bufs;
  for (int i = 0; i < kWithdrawDepth; ++i) bufs.emplace_back(size);
  hmc_request_t reqs[kWithdrawDepth] = {};
  uint64_t posted = 0, landed = 0;
  bool refused = false, said_go = false;
  // Ends the put in slot k: landed or refused, nothing else.
  auto end_slot = [&](int k) {
    if (!reqs[k]) return;
    hmc_status_t st = hmc_request_wait(reqs[k], kOpTimeoutMs, nullptr);
    reqs[k] = nullptr;
    if (st == HMC_SUCCESS)
      ++landed;
    else if (st == HMC_ERR_REMOTE)
      refused = true;
    else
      die("a put ended with " + describe(st) + " (expected success or HMC_ERR_REMOTE)");
  };
  auto t0 = Clock::now();
  while (!refused) {
    for (int k = 0; k < kWithdrawDepth && !refused; ++k) {
      end_slot(k);
      if (refused) break;
      pattern_fill(bufs[k].data(), size, kWithdrawSeed + posted);
      hmc_status_t st = hmc_put(p.peer, bufs[k].data(), size, rem.get(), 0, 0, 0, &reqs[k]);
      if (st == HMC_ERR_REMOTE) {
        reqs[k] = nullptr;
        refused = true;
      } else {
        check_ok(st, "hmc_put #" + std::to_string(posted));
        ++posted;
      }
    }
    if (!said_go && landed > 0) {
      p.send_ctrl(kTagCtrl, kCtrlGo);
      said_go = true;
    }
    check(ms_since(t0) < kWithdrawRefusedWithinMs,
          "after " + std::to_string(posted) + " puts in " + std::to_string(ms_since(t0)) +
              " ms none was refused: the parent's deregistration did not reach us");
  }
  for (int k = 0; k < kWithdrawDepth; ++k) end_slot(k);
  check(said_go, "the first put was refused already");
  // From now on every access is refused, at once or by its request.
  HostBuffer b(16);
  hmc_request_t req = nullptr;
  hmc_status_t st = hmc_put(p.peer, b.data(), 16, rem.get(), 0, 0, 0, &req);
  if (st == HMC_SUCCESS) st = hmc_request_wait(req, kOpTimeoutMs, nullptr);
  check(st == HMC_ERR_REMOTE, "a put after the refusal: " + describe(st));
  req = nullptr;
  st = hmc_get(p.peer, b.data(), 16, rem.get(), 0, &req);
  if (st == HMC_SUCCESS) st = hmc_request_wait(req, kOpTimeoutMs, nullptr);
  check(st == HMC_ERR_REMOTE, "a get after the refusal: " + describe(st));
  printf("%" PRIu64 " puts landed, %" PRIu64 " posted before the refusal\n", landed, posted);
  p.send_ctrl(kTagCtrl + 2, landed);
  p.expect_ctrl(kTagCtrl, kCtrlDone);
}

// Imports the parent's regions, releases one, says so, then dies or goes idle.
[[noreturn]] void run_import_then_stop(const Peer& p) {
  const uint64_t count = p.arg_u64("count");
  const uint64_t release = p.arg_u64("release");
  const std::string how = p.arg("how");
  check(how == "die" || how == "idle", "how=" + how + ": expected die or idle");
  std::vector<Remote> rems(count);
  for (uint64_t i = 0; i < count; ++i) {
    std::vector<uint8_t> desc;
    std::string err;
    if (recv_blob(p.peer, kTagDesc + i, &desc, kOpTimeoutMs, &err) != HMC_SUCCESS)
      die("receiving descriptor " + std::to_string(i) + ": " + err);
    check_ok(rems[i].import(p.peer, desc), "hmc_remote_import of region " + std::to_string(i));
    if (i == release) rems[i].release();  // the next import's answer shows the parent read it
  }
  p.send_ctrl(kTagCtrl, kCtrlImported);
  fflush(stdout);
  if (how == "die") raise(SIGKILL);
  // Idle: no hmc call from here on (the parent kills us; alarm() is the backstop).
  for (;;) pause();
}

void kill_self(int) {
  raise(SIGKILL);
}  // async-signal-safe

// Says so, then arms a timer signal that kills this process 20 ms from now, wherever its
// threads are, inside hmc calls too. (It replaces the alarm() backstop, moot from here on.)
void kill_self_20ms_into(const std::string& what) {
  fprintf(stderr, "hmc-test-peer: SIGKILL to self 20 ms into %s\n", what.c_str());
  struct sigaction sa {};
  sa.sa_handler = kill_self;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval t{};
  t.it_value.tv_usec = 20000;
  setitimer(ITIMER_REAL, &t, nullptr);
}

[[noreturn]] void run_xfer_target_die(const Peer& p) {
  size_t size = p.arg_u64("size");
  void* mem = calloc(size, 1);  // untouched zero pages: nothing to prepare
  check(mem != nullptr, "calloc of " + std::to_string(size) + " bytes");
  Region r;
  check_ok(r.register_mem(p.ctx, mem, size, HMC_ACCESS_REMOTE_READ), "hmc_mem_register");
  std::vector<uint8_t> desc = pack_region(r, "the region");
  p.send_buf(desc.data(), desc.size(), kTagDesc);
  p.expect_ctrl(kTagCtrl, kCtrlGo);
  // The progress thread serves the parent's reads; a timer kills the process under them.
  kill_self_20ms_into("the parent's list reads");
  for (;;) pause();
}

[[noreturn]] void run_die_mid_send(const Peer& p) {
  size_t size = p.arg_u64("size");
  p.expect_ctrl(kTagCtrl, kCtrlGo);
  // calloc: untouched zero pages, so a 1 GiB message costs no time to prepare.
  void* buf = calloc(size, 1);
  check(buf != nullptr, "calloc of " + std::to_string(size) + " bytes");
  // Die while the transfer runs: 20 ms after posting, a fraction of what the message takes on
  // loopback.
  kill_self_20ms_into("a " + std::to_string(size) + "-byte send");
  hmc_request_t req = nullptr;
  check_ok(hmc_send(p.peer, buf, size, kTagData, &req), "hmc_send of the large message");
  hmc_status_t st = hmc_request_wait(req, kOpTimeoutMs, nullptr);
  die("the large send ended (" + describe(st) + ") before the kill point; make it larger");
}

void run_echo(const Peer& p) {
  uint64_t v = p.recv_ctrl(kTagCtrl);
  p.send_ctrl(kTagCtrl + 1, v + 1);
  HostBuffer b(kMiB + 3);
  p.recv_pattern(b.data(), b.size(), kTagData, kSeedParent);
  pattern_fill(b.data(), b.size(), kSeedChild);
  p.send_buf(b.data(), b.size(), kTagReply);
}

// Sends everything, waits for the sends to complete, and returns to main, which closes the
// peer and destroys the context at once.
void run_send_then_close(const Peer& p) {
  p.expect_ctrl(kTagCtrl, kCtrlGo);
  const auto& sizes = send_then_close_sizes(p.arg("set") == "small");
  std::vector<HostBuffer> bufs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs.emplace_back(sizes[i]);
    pattern_fill(bufs[i].data(), sizes[i], kSeedChild + i);
  }
  Requests rq;
  for (size_t i = 0; i < sizes.size(); ++i)
    rq.post([&](hmc_request_t* posted) {
      return hmc_send(p.peer, bufs[i].data(), sizes[i], kTagReply + i, posted);
    });
  for (size_t i = 0; i < rq.size(); ++i) {
    const auto& r = rq.wait(i, kOpTimeoutMs);
    check(r.status == HMC_SUCCESS, "send " + std::to_string(i) + ": " + r.error);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <scenario> <address hex> [key=value ...]\n", argv[0]);
    return 2;
  }
  g_scenario = argv[1];
  Peer p{};
  for (int i = 3; i < argc; ++i) {
    const char* eq = strchr(argv[i], '=');
    if (!eq) die(std::string("bad argument '") + argv[i] + "', expected key=value");
    p.args[std::string(argv[i], eq - argv[i])] = eq + 1;
  }
  // Never outlive the test: die with it, and refuse to start if it is already gone.
  auto ppid = p.args.find("parent-pid");
  if (ppid != p.args.end()) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != static_cast<pid_t>(strtol(ppid->second.c_str(), nullptr, 10)))
      die("the test process is gone");
  }
  alarm(kPeerAlarmSeconds);

  std::vector<uint8_t> addr;
  if (!hex_decode(argv[2], &addr)) die("the address argument is not hex");
  Context ctx;
  auto pt = p.args.find("progress-thread");  // progress-thread=0: none (the default is one)
  check_ok(ctx.create(pt != p.args.end() ? atoi(pt->second.c_str()) : 1), "hmc_context_create");
  p.ctx = ctx.get();
  auto t0 = Clock::now();
  hmc_status_t st = hmc_connect(p.ctx, addr.data(), addr.size(), kConnectTimeoutMs, &p.peer);
  // The flood test reads this line: a real peer's connect time under load.
  printf("hmc_connect took %.2f ms\n",
         std::chrono::duration<double, std::milli>(Clock::now() - t0).count());

  if (g_scenario == scenario::kConnectExpect) {
    auto want = static_cast<hmc_status_t>(strtol(p.arg("status").c_str(), nullptr, 10));
    check(st == want, std::string("hmc_connect returned ") + describe(st) + ", expected " +
                          hmc_status_string(want));
    if (st != HMC_SUCCESS) {
      check(*hmc_last_error() != '\0', "hmc_connect failed without a message");
      printf("hmc_connect failed as expected: %s\n", describe(st).c_str());
      return ctx.reset() == HMC_SUCCESS ? 0 : 1;
    }
    run_hello(p);
  } else {
    check_ok(st, "hmc_connect");
    static const std::map<std::string, void (*)(const Peer&)> scenarios{
        {scenario::kHello, run_hello},
        {scenario::kEchoSizes, run_echo_sizes},
        {scenario::kOrdering, run_ordering},
        {scenario::kTruncate, run_truncate},
        {scenario::kConcurrent, run_concurrent},
        {scenario::kRmaTarget, run_rma_target},
        {scenario::kXferTarget, run_xfer_target},
        {scenario::kXferTargetDie, run_xfer_target_die},
        {scenario::kNotifyInitiator, run_notify_initiator},
        {scenario::kBoundsTarget, run_bounds_target},
        {scenario::kWithdrawInitiator, run_withdraw_initiator},
        {scenario::kImportThenStop, run_import_then_stop},
        {scenario::kDieMidSend, run_die_mid_send},
        {scenario::kEcho, run_echo},
        {scenario::kSendThenClose, run_send_then_close},
    };
    auto it = scenarios.find(g_scenario);
    if (it == scenarios.end()) die("unknown scenario");
    it->second(p);
  }
  if (g_scenario != scenario::kSendThenClose) p.expect_ctrl(kTagBye, kCtrlBye);
  check_ok(hmc_peer_close(p.peer), "hmc_peer_close");
  check_ok(ctx.reset(), "hmc_context_destroy");
  return 0;
}

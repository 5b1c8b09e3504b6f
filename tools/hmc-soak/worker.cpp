#include "worker.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "lines.h"
#include "pattern.h"

using nlohmann::json;

namespace soak {

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

constexpr uint64_t kHelloTag = 1ull << 40;
constexpr uint64_t kDescTag = (1ull << 40) + 1;
constexpr size_t kDescMax = 1024;

struct Counters {
  uint64_t posted = 0, ended = 0, not_ended = 0;
  uint64_t bytes_moved = 0, bytes_verified = 0, verified = 0;
  uint64_t corrupted = 0, lost = 0, hangs = 0, errors = 0, stale_notifications = 0;
  uint64_t epochs = 0, epochs_failed = 0, comms_created = 0, comms_split = 0;
  std::map<std::string, uint64_t> ops;  // steps finished, by kind

  json to_json() const {
    return {{"posted", posted},
            {"ended", ended},
            {"not_ended", not_ended},
            {"bytes_moved", bytes_moved},
            {"bytes_verified", bytes_verified},
            {"verified", verified},
            {"corrupted", corrupted},
            {"lost", lost},
            {"hangs", hangs},
            {"errors", errors},
            {"stale_notifications", stale_notifications},
            {"epochs", epochs},
            {"epochs_failed", epochs_failed},
            {"comms_created", comms_created},
            {"comms_split", comms_split},
            {"ops", ops}};
  }
};

// A buffer of max_size bytes in host or device memory.
struct Buf {
  void* p = nullptr;
  bool dev = false;
  unsigned char* at(size_t off) const { return static_cast<unsigned char*>(p) + off; }
};

std::string hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned c = static_cast<const unsigned char*>(p)[i];
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

std::vector<unsigned char> unhex(const std::string& s) {
  std::vector<unsigned char> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<unsigned char>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

// One one-sided transfer's shape: where, how much, on which memory, notified or not.
struct RmaParams {
  size_t size, off;
  bool dev, notify;
  uint64_t value;
};

struct RmaPair {
  int ahead, behind;
  RmaParams mine, theirs;
};

class Worker {
 public:
  explicit Worker(const WorkerSetup& s) : s_(s), cmds_(s.cmd_fd) {}
  int run();

 private:
  // The state of one epoch.
  struct Epoch {
    uint64_t number = 0, seed = 0;
    int rank = 0, n = 1;
    hmc_comm_t comm = nullptr;
    std::vector<hmc_peer_t> peers;
    std::vector<hmc_remote_t> remote_h, remote_d;
    hmc_region_t reg_h = nullptr, reg_d = nullptr, reg_x = nullptr;
    bool failed = false;
    int64_t first_error_ns = 0;
    std::string error, status;
    int64_t started_ns = 0;
    uint64_t steps = 0;
  };

  bool alloc_buffers();
  void report(json j);
  void maybe_stats();
  void run_epoch(const json& cmd);
  bool setup_epoch(const json& cmd);
  void teardown_epoch();

  // Notes an error of an hmc call (the first of the epoch is reported with its time).
  bool fail(const std::string& what, hmc_status_t st);
  void first_error(const std::string& text, hmc_status_t st);
  bool abort_asked();  // whether the launcher said to abort this epoch
  bool check_ok(const char* what, hmc_status_t st) {
    if (st == HMC_SUCCESS) return true;
    fail(what, st);
    return false;
  }
  // Waits for a request (bounded); counts it ended, or a hang and not ended.
  hmc_status_t wait(hmc_request_t* req, size_t* bytes);
  // Waits and checks that a successful request moved exactly `want` bytes.
  bool wait_ok(const char* what, hmc_request_t* req, size_t want);
  bool barrier(hmc_comm_t comm);

  // Payload helpers: write bytes [pos, pos+len) of stream key at b+off; compare b+off.
  void put_pattern(const Buf& b, size_t off, uint64_t key, uint64_t pos, size_t len);
  const unsigned char* host_view(const Buf& b, size_t off, size_t len);
  bool verify(const char* what, const Buf& b, size_t off, size_t len, uint64_t key, uint64_t pos);
  bool verify_expected(const char* what, const Buf& b, size_t len);  // against exp_

  Buf pick(Rng& r, const Buf& host, const Buf& dev) { return dev.p && r.chance(50) ? dev : host; }
  uint64_t key(uint64_t step, uint64_t who) { return mix(s_.seed, ep_.number, step, who); }

  bool step_sendrecv(uint64_t s, Rng& r);
  bool step_put(uint64_t s, Rng& r);
  RmaParams rma_params(uint64_t s, int w, uint64_t salt, bool owner_has_dev) const;
  // The workers k ahead (whose region this one acts on: mine) and k behind (which acts on this
  // one's: theirs) for one-sided step s, k drawn from r.
  RmaPair rma_pair(uint64_t s, Rng& r, uint64_t salt) const;
  bool step_get(uint64_t s, Rng& r);
  bool step_xfer(uint64_t s, Rng& r);
  bool step_collective(uint64_t s, Rng& r, hmc_comm_t comm, int rank,
                       const std::vector<int>& group);
  bool step_split(uint64_t s, Rng& r);
  bool notify_expect(int from, uint64_t value);

  WorkerSetup s_;
  LineReader cmds_;
  hmc_context_t ctx_ = nullptr;
  Counters c_;
  Epoch ep_;
  int64_t last_stats_ns_ = 0;
  bool aborted_ = false;
  uint64_t checked_ = 0;
  std::string waiting_;        // what the last wait was for
  std::vector<json> pending_;  // commands read while waiting
  size_t max_ = 0;
  Buf hsend_, hrecv_, dsend_, drecv_, rma_h_, rma_d_, xloc_;
  std::vector<unsigned char> exp_, tmp_, tmp2_;
};

void Worker::first_error(const std::string& text, hmc_status_t st) {
  if (ep_.failed) return;
  ep_.failed = true;
  ep_.first_error_ns = mono_ns();
  ep_.error = text;
  ep_.status = hmc_status_string(st);
  report({{"type", "error"},
          {"epoch", ep_.number},
          {"t_ns", ep_.first_error_ns},
          {"status", ep_.status},
          {"aborted", aborted_},
          {"injected", s_.injecting && st == HMC_ERR_PLUGIN},
          {"error", text}});
}

bool Worker::fail(const std::string& what, hmc_status_t st) {
  ++c_.errors;
  first_error(what + ": " + hmc_status_string(st) + ": " + hmc_last_error(), st);
  return false;
}

bool Worker::abort_asked() {
  if (aborted_) return true;
  cmds_.pump();
  json j;
  while (cmds_.take(&j)) {
    if (j.value("type", "") == "abort" && j.value("epoch", uint64_t(0)) == ep_.number)
      aborted_ = true;
    else if (j.value("type", "") != "abort")
      pending_.push_back(j);
  }
  return aborted_;
}

hmc_status_t Worker::wait(hmc_request_t* req, size_t* bytes) {
  // In slices, to hear the launcher's abort (the epoch failed elsewhere) between them.
  int64_t until = mono_ns() + int64_t(s_.hang_ms) * 1000000;
  hmc_status_t st = HMC_ERR_TIMEOUT;
  for (;;) {
    st = hmc_request_wait(*req, 50, bytes);
    if (st != HMC_ERR_TIMEOUT || mono_ns() >= until || abort_asked()) break;
  }
  if (st == HMC_ERR_TIMEOUT) {
    if (aborted_) {
      first_error(waiting_ + ": aborted by the launcher (the epoch failed elsewhere)",
                  HMC_ERR_CANCELLED);
    } else {
      ++c_.hangs;
      first_error(waiting_ + ": the wait exceeded " + std::to_string(s_.hang_ms) + " ms (hang)",
                  HMC_ERR_TIMEOUT);
    }
    hmc_request_cancel(*req);
    st = hmc_request_wait(*req, s_.hang_ms, bytes);
    if (st == HMC_ERR_TIMEOUT) {
      ++c_.not_ended;
      *req = nullptr;
      return HMC_ERR_TIMEOUT;
    }
  }
  ++c_.ended;
  *req = nullptr;
  return st;
}

bool Worker::wait_ok(const char* what, hmc_request_t* req, size_t want) {
  waiting_ = what;
  size_t bytes = 0;
  hmc_status_t st = wait(req, &bytes);
  if (st != HMC_SUCCESS) return fail(what, st);
  if (want != SIZE_MAX && bytes != want) {
    ++c_.lost;
    first_error(std::string(what) + ": succeeded with " + std::to_string(bytes) + " bytes of " +
                    std::to_string(want) + " (lost)",
                HMC_ERR_INTERNAL);
    return false;
  }
  c_.bytes_moved += bytes;
  return true;
}

bool Worker::barrier(hmc_comm_t comm) {
  hmc_request_t req = nullptr;
  hmc_status_t st = hmc_barrier(comm, &req);
  if (st != HMC_SUCCESS) return fail("hmc_barrier", st);
  ++c_.posted;
  return wait_ok("barrier", &req, SIZE_MAX);
}

void Worker::put_pattern(const Buf& b, size_t off, uint64_t k, uint64_t pos, size_t len) {
  if (!b.dev) {
    fill(k, pos, len, b.at(off));
    return;
  }
  fill(k, pos, len, tmp_.data());
  hmc_status_t st = hmc_mem_copy(ctx_, b.at(off), tmp_.data(), len);
  if (st != HMC_SUCCESS) fail("hmc_mem_copy to device", st);
}

const unsigned char* Worker::host_view(const Buf& b, size_t off, size_t len) {
  if (!b.dev) return b.at(off);
  hmc_status_t st = hmc_mem_copy(ctx_, tmp_.data(), b.at(off), len);
  if (st != HMC_SUCCESS) {
    fail("hmc_mem_copy from device", st);
    return nullptr;
  }
  return tmp_.data();
}

bool Worker::verify_expected(const char* what, const Buf& b, size_t len) {
  const unsigned char* got = host_view(b, 0, len);
  if (!got) return false;
  // hmc-soak's own test: a byte flipped where the receiver reads it must be found.
  if (s_.inject_corruption && ++checked_ % s_.inject_corruption == 0)
    const_cast<unsigned char*>(got)[len / 2] ^= 0x5a;
  if (hash(got, len) != hash(exp_.data(), len)) {
    ++c_.corrupted;
    size_t first = 0;
    while (first < len && got[first] == exp_[first]) ++first;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %zu bytes%s: XXH3 differs, first wrong byte at %zu", what, len,
             b.dev ? " (device)" : "", first);
    first_error(msg, HMC_ERR_INTERNAL);
    fprintf(stderr, "hmc-soak: worker %d: CORRUPTED epoch %llu step %llu: %s\n", s_.id,
            (unsigned long long)ep_.number, (unsigned long long)ep_.steps, msg);
    return false;
  }
  ++c_.verified;
  c_.bytes_verified += len;
  return true;
}

bool Worker::verify(const char* what, const Buf& b, size_t off, size_t len, uint64_t k,
                    uint64_t pos) {
  fill(k, pos, len, exp_.data());
  Buf view = b;
  view.p = b.at(off);
  return verify_expected(what, view, len);
}

bool Worker::alloc_buffers() {
  max_ = s_.max_size;
  auto host = [&](Buf* b) {
    b->p = std::aligned_alloc(4096, (max_ + 4095) / 4096 * 4096);
    if (!b->p) return false;
    std::memset(b->p, 0, max_);  // resident from the start: RSS growth is the library's
    return true;
  };
  auto dev = [&](Buf* b) {
    hmc_status_t st = hmc_mem_alloc(ctx_, s_.device.c_str(), max_, &b->p);
    if (st != HMC_SUCCESS) {
      fprintf(stderr, "hmc-soak: worker %d: hmc_mem_alloc(%s): %s: %s\n", s_.id, s_.device.c_str(),
              hmc_status_string(st), hmc_last_error());
      return false;
    }
    b->dev = true;
    std::vector<unsigned char> zero(max_, 0);
    return hmc_mem_copy(ctx_, b->p, zero.data(), max_) == HMC_SUCCESS;
  };
  exp_.assign(max_, 0);
  tmp_.assign(max_, 0);
  tmp2_.assign(max_, 0);
  if (!host(&hsend_) || !host(&hrecv_) || !host(&rma_h_) || !host(&xloc_)) return false;
  if (!s_.device.empty() && (!dev(&dsend_) || !dev(&drecv_) || !dev(&rma_d_))) return false;
  return true;
}

void Worker::report(json j) {
  j["id"] = s_.id;
  if (!write_line(s_.rep_fd, j)) _exit(3);  // the launcher is gone
}

void Worker::maybe_stats() {
  int64_t now = mono_ns();
  if (now - last_stats_ns_ < 1000000000) return;
  last_stats_ns_ = now;
  report({{"type", "stats"}, {"counters", c_.to_json()}, {"epoch", ep_.number}});
}

int Worker::run() {
  hmc_status_t st = hmc_context_create(nullptr, &ctx_);
  if (st != HMC_SUCCESS) {
    report({{"type", "fatal"},
            {"error", std::string("hmc_context_create: ") + hmc_status_string(st) + ": " +
                          hmc_last_error()}});
    return 1;
  }
  if (!alloc_buffers()) {
    report({{"type", "fatal"}, {"error", "allocating the buffers failed"}});
    return 1;
  }
  unsigned char addr[HMC_ADDRESS_MAX];
  size_t len = sizeof addr;
  if ((st = hmc_address(ctx_, addr, &len)) != HMC_SUCCESS) {
    report({{"type", "fatal"}, {"error", std::string("hmc_address: ") + hmc_last_error()}});
    return 1;
  }
  report({{"type", "hello"}, {"pid", getpid()}, {"addr", hex(addr, len)}, {"device", s_.device}});
  for (;;) {
    json cmd;
    if (!pending_.empty()) {
      cmd = pending_.front();
      pending_.erase(pending_.begin());
    } else if (cmds_.read(600000, &cmd) <= 0) {
      break;  // the launcher went, or said nothing for 10 minutes
    }
    std::string type = cmd.value("type", "");
    if (type == "quit") break;
    if (type == "epoch") run_epoch(cmd);
  }
  report({{"type", "bye"}, {"counters", c_.to_json()}});
  hmc_context_destroy(ctx_);
  return 0;
}

bool Worker::setup_epoch(const json& cmd) {
  ep_ = Epoch{};
  aborted_ = false;
  ep_.number = cmd["epoch"].get<uint64_t>();
  ep_.seed = cmd["seed"].get<uint64_t>();
  ep_.rank = cmd["rank"].get<int>();
  ep_.started_ns = mono_ns();
  const json& members = cmd["members"];
  ep_.n = int(members.size());
  int n = ep_.n, me = ep_.rank;
  // Stale notifications of an epoch that failed are not this one's.
  hmc_notification_t note;
  while (hmc_notify_wait(ctx_, 0, &note) == HMC_SUCCESS) ++c_.stale_notifications;

  std::string rdv = cmd["rendezvous"].get<std::string>();
  hmc_comm_options_t o{};
  o.struct_size = sizeof o;
  o.rank = me;
  o.size = n;
  o.rendezvous = rdv.c_str();
  o.timeout_ms = s_.timeout_ms;
  if (!check_ok("hmc_comm_create", hmc_comm_create(ctx_, &o, &ep_.comm))) return false;
  ++c_.comms_created;

  // Peers: the lower rank dials, the higher accepts and learns who it is from a hello.
  ep_.peers.assign(size_t(n), nullptr);
  for (int j = me + 1; j < n; ++j) {
    std::vector<unsigned char> a = unhex(members[size_t(j)]["addr"].get<std::string>());
    if (!check_ok("hmc_connect",
                  hmc_connect(ctx_, a.data(), a.size(), s_.timeout_ms, &ep_.peers[size_t(j)])))
      return false;
    static thread_local uint64_t hello;
    hello = uint64_t(me) | (ep_.number << 16);
    hmc_request_t req = nullptr;
    if (!check_ok("hmc_send hello", hmc_send(ep_.peers[size_t(j)], &hello, 8, kHelloTag, &req)))
      return false;
    ++c_.posted;
    if (!wait_ok("hello send", &req, 8)) return false;
  }
  for (int i = 0; i < me; ++i) {
    hmc_peer_t p = nullptr;
    if (!check_ok("hmc_accept", hmc_accept(ctx_, s_.timeout_ms, &p))) return false;
    uint64_t hello = 0;
    hmc_request_t req = nullptr;
    if (!check_ok("hmc_recv hello", hmc_recv(p, &hello, 8, kHelloTag, &req))) {
      hmc_peer_close(p);
      return false;
    }
    ++c_.posted;
    if (!wait_ok("hello recv", &req, 8)) {
      hmc_peer_close(p);
      return false;
    }
    int who = int(hello & 0xffff);
    if ((hello >> 16) != ep_.number || who < 0 || who >= me || ep_.peers[size_t(who)]) {
      hmc_peer_close(p);  // a dialler of another epoch (it failed there): not ours
      --i;
      continue;
    }
    ep_.peers[size_t(who)] = p;
  }

  // Regions: this worker's host and device targets and its local region for transfer lists.
  uint32_t rw = HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE;
  if (!check_ok("hmc_mem_register host", hmc_mem_register(ctx_, rma_h_.p, max_, rw, &ep_.reg_h)))
    return false;
  if (rma_d_.p &&
      !check_ok("hmc_mem_register device", hmc_mem_register(ctx_, rma_d_.p, max_, rw, &ep_.reg_d)))
    return false;
  if (!check_ok("hmc_mem_register local", hmc_mem_register(ctx_, xloc_.p, max_, rw, &ep_.reg_x)))
    return false;
  std::vector<unsigned char> desc(kDescMax, 0);
  uint32_t lh = 0, ld = 0;
  size_t l = kDescMax / 2 - 8;
  if (!check_ok("hmc_region_pack", hmc_region_pack(ep_.reg_h, desc.data() + 8, &l))) return false;
  lh = uint32_t(l);
  if (ep_.reg_d) {
    l = kDescMax / 2 - 8;
    if (!check_ok("hmc_region_pack", hmc_region_pack(ep_.reg_d, desc.data() + 8 + lh, &l)))
      return false;
    ld = uint32_t(l);
  }
  std::memcpy(desc.data(), &lh, 4);
  std::memcpy(desc.data() + 4, &ld, 4);
  std::vector<std::vector<unsigned char>> theirs(size_t(n),
                                                 std::vector<unsigned char>(kDescMax, 0));
  std::vector<hmc_request_t> reqs;
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    hmc_request_t q = nullptr;
    if (!check_ok("hmc_recv desc", hmc_recv(ep_.peers[size_t(j)], theirs.at(size_t(j)).data(),
                                            kDescMax, kDescTag, &q)))
      break;
    ++c_.posted;
    reqs.push_back(q);
    if (!check_ok("hmc_send desc",
                  hmc_send(ep_.peers[size_t(j)], desc.data(), 8 + lh + ld, kDescTag, &q)))
      break;
    ++c_.posted;
    reqs.push_back(q);
  }
  for (auto& q : reqs) wait_ok("desc exchange", &q, SIZE_MAX);
  if (ep_.failed) return false;
  ep_.remote_h.assign(size_t(n), nullptr);
  ep_.remote_d.assign(size_t(n), nullptr);
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    const unsigned char* d = theirs[size_t(j)].data();
    uint32_t h = 0, dv = 0;
    std::memcpy(&h, d, 4);
    std::memcpy(&dv, d + 4, 4);
    if (!check_ok("hmc_remote_import",
                  hmc_remote_import(ep_.peers[size_t(j)], d + 8, h, &ep_.remote_h[size_t(j)])))
      return false;
    if (dv &&
        !check_ok("hmc_remote_import device",
                  hmc_remote_import(ep_.peers[size_t(j)], d + 8 + h, dv, &ep_.remote_d[size_t(j)])))
      return false;
  }
  return barrier(ep_.comm);
}

void Worker::teardown_epoch() {
  for (auto r : ep_.remote_h)
    if (r) hmc_remote_release(r);
  for (auto r : ep_.remote_d)
    if (r) hmc_remote_release(r);
  for (hmc_region_t g : {ep_.reg_h, ep_.reg_d, ep_.reg_x})
    if (g) hmc_mem_deregister(g);
  for (auto p : ep_.peers)
    if (p) hmc_peer_close(p);
  if (ep_.comm) {
    hmc_status_t st = hmc_comm_destroy(ep_.comm);
    if (st != HMC_SUCCESS) fail("hmc_comm_destroy", st);
  }
  ep_.comm = nullptr;
  ep_.peers.clear();
  ep_.remote_h.clear();
  ep_.remote_d.clear();
}

void Worker::run_epoch(const json& cmd) {
  int64_t seconds_ns = int64_t(cmd.value("seconds", 3.0) * 1e9);
  uint64_t max_steps = cmd.value("max_steps", uint64_t(100000));
  ++c_.epochs;
  bool ok = setup_epoch(cmd);
  if (ok) report({{"type", "running"}, {"epoch", ep_.number}});
  std::vector<int> all(size_t(ep_.n));
  for (int i = 0; i < ep_.n; ++i) all[size_t(i)] = i;
  for (uint64_t s = 0; ok && s < max_steps; ++s) {
    ep_.steps = s;
    Rng r(mix(ep_.seed, s));
    int n = ep_.n;
    unsigned k = unsigned(r.below(100));
    if (s % 8 == 7) {
      // Whether to go on: rank 0's clock decides for all, by a broadcast.
      static thread_local int32_t go;
      go = ep_.rank == 0 ? (mono_ns() - ep_.started_ns < seconds_ns ? 1 : 0) : -1;
      hmc_request_t q = nullptr;
      if (!check_ok("hmc_broadcast go", hmc_broadcast(ep_.comm, &go, 1, HMC_DTYPE_I32, 0, &q))) {
        ok = false;
        break;
      }
      ++c_.posted;
      if (!wait_ok("broadcast go", &q, SIZE_MAX)) {
        ok = false;
        break;
      }
      if (go != 0 && go != 1) {
        ++c_.corrupted;
        fail("broadcast go: neither 0 nor 1", HMC_ERR_INTERNAL);
        ok = false;
        break;
      }
      if (!go) break;
      continue;
    }
    if (n == 1 || k < 40)
      ok = step_collective(s, r, ep_.comm, ep_.rank, all);
    else if (k < 55)
      ok = step_sendrecv(s, r);
    else if (k < 68)
      ok = step_put(s, r);
    else if (k < 80)
      ok = step_get(s, r);
    else if (k < 93)
      ok = step_xfer(s, r);
    else
      ok = step_split(s, r);
    ok = ok && !ep_.failed;
    maybe_stats();
  }
  teardown_epoch();
  if (ep_.failed) ++c_.epochs_failed;
  report({{"type", "epoch_done"},
          {"epoch", ep_.number},
          {"ok", !ep_.failed},
          {"steps", ep_.steps},
          {"first_error_ns", ep_.first_error_ns},
          {"error", ep_.error},
          {"counters", c_.to_json()}});
  last_stats_ns_ = mono_ns();
}

// ---- the steps: every rank derives the same step from the epoch's seed -----------------------

bool Worker::step_sendrecv(uint64_t s, Rng& r) {
  int n = ep_.n, me = ep_.rank;
  int k = 1 + int(r.below(uint64_t(n - 1)));
  int dst = (me + k) % n, src = (me - k + n) % n;
  auto size_of = [&](int sender) { return Rng(mix(ep_.seed, s, uint64_t(sender), 1)).size(max_); };
  Rng mine(mix(ep_.seed, s, uint64_t(me), 2));
  size_t ssz = size_of(me), rsz = size_of(src);
  size_t cap = mine.chance(30) ? rsz + size_t(mine.below(max_ - rsz + 1)) : rsz;
  Buf sb = pick(mine, hsend_, dsend_), rb = pick(mine, hrecv_, drecv_);
  put_pattern(sb, 0, key(s, uint64_t(me)), 0, ssz);
  hmc_request_t rq = nullptr, sq = nullptr;
  if (!check_ok("hmc_recv", hmc_recv(ep_.peers[size_t(src)], rb.p, cap, s, &rq))) return false;
  ++c_.posted;
  if (hmc_status_t st = hmc_send(ep_.peers[size_t(dst)], sb.p, ssz, s, &sq); st != HMC_SUCCESS) {
    fail("hmc_send", st);
    hmc_request_cancel(rq);
    wait(&rq, nullptr);
    return false;
  }
  ++c_.posted;
  bool ok = wait_ok("send", &sq, ssz);
  ok = wait_ok("recv", &rq, rsz) && ok;
  if (!ok) return false;
  ++c_.ops["sendrecv"];
  return verify("recv", rb, 0, rsz, key(s, uint64_t(src)), 0);
}

bool Worker::notify_expect(int from, uint64_t value) {
  for (;;) {
    hmc_notification_t note{};
    int64_t until = mono_ns() + int64_t(s_.hang_ms) * 1000000;
    hmc_status_t st;
    while ((st = hmc_notify_wait(ctx_, 50, &note)) == HMC_ERR_TIMEOUT && mono_ns() < until &&
           !abort_asked()) {
    }
    if (st == HMC_ERR_TIMEOUT && aborted_)
      return fail("hmc_notify_wait: aborted by the launcher", HMC_ERR_CANCELLED);
    if (st == HMC_ERR_TIMEOUT) {
      ++c_.lost;
      return fail("hmc_notify_wait: the notification of a put that succeeded never came", st);
    }
    if (st != HMC_SUCCESS) return fail("hmc_notify_wait", st);
    if ((note.value >> 32) != (ep_.number & 0xffffffff)) {
      ++c_.stale_notifications;
      continue;
    }
    if (note.value != value || note.peer != ep_.peers[size_t(from)]) {
      ++c_.corrupted;
      return fail("hmc_notify_wait: a notification of another value or peer", HMC_ERR_INTERNAL);
    }
    return true;
  }
}

// The one-sided steps: rank r acts on (r + k) % n, so every region has one writer or reader.
// Worker w's draw for one-sided step s (salt: the step kind's), the same on every worker.
RmaParams Worker::rma_params(uint64_t s, int w, uint64_t salt, bool owner_has_dev) const {
  Rng q(mix(ep_.seed, s, uint64_t(w), salt));
  RmaParams p{};
  p.size = q.size(max_);
  p.off = size_t(q.below(max_ - p.size + 1));
  p.dev = q.chance(50) && owner_has_dev;
  p.notify = q.chance(50);
  p.value = ((ep_.number & 0xffffffff) << 32) | (s & 0xffffffff);
  return p;
}

RmaPair Worker::rma_pair(uint64_t s, Rng& r, uint64_t salt) const {
  const int n = ep_.n, me = ep_.rank;
  const int k = 1 + int(r.below(uint64_t(n - 1)));
  RmaPair p;
  p.ahead = (me + k) % n;
  p.behind = (me - k + n) % n;
  p.mine = rma_params(s, me, salt, ep_.remote_d[size_t(p.ahead)] != nullptr);
  p.theirs = rma_params(s, p.behind, salt, rma_d_.p != nullptr);
  return p;
}

bool Worker::step_put(uint64_t s, Rng& r) {
  const int me = ep_.rank;
  const auto [tgt, src, out, in] = rma_pair(s, r, 3);
  Rng mine(mix(ep_.seed, s, uint64_t(me), 4));
  Buf sb = pick(mine, hsend_, dsend_);
  put_pattern(sb, 0, key(s, uint64_t(me)), out.off, out.size);
  hmc_request_t q = nullptr;
  hmc_remote_t rem = out.dev ? ep_.remote_d[size_t(tgt)] : ep_.remote_h[size_t(tgt)];
  if (!check_ok("hmc_put", hmc_put(ep_.peers[size_t(tgt)], sb.p, out.size, rem, out.off,
                                   out.notify ? HMC_PUT_NOTIFY : 0, out.value, &q)))
    return false;
  ++c_.posted;
  if (!wait_ok(out.notify ? "put (notify)" : "put", &q, out.size)) return false;
  // After the barrier the source's put has succeeded, so its notification must come; before
  // it, a source that died or froze would read as a lost notification.
  if (!barrier(ep_.comm)) return false;
  if (in.notify && !notify_expect(src, in.value)) return false;
  ++c_.ops[out.notify ? "put_notify" : "put"];
  if (!verify("put target", in.dev ? rma_d_ : rma_h_, in.off, in.size, key(s, uint64_t(src)),
              in.off))
    return false;
  return barrier(ep_.comm);
}

bool Worker::step_get(uint64_t s, Rng& r) {
  const int me = ep_.rank;
  const auto [owner, reader, mine, theirs] = rma_pair(s, r, 5);
  put_pattern(theirs.dev ? rma_d_ : rma_h_, theirs.off, key(s, uint64_t(me)), theirs.off,
              theirs.size);
  if (!barrier(ep_.comm)) return false;
  Rng local(mix(ep_.seed, s, uint64_t(me), 6));
  Buf db = pick(local, hrecv_, drecv_);
  hmc_remote_t rem = mine.dev ? ep_.remote_d[size_t(owner)] : ep_.remote_h[size_t(owner)];
  hmc_request_t q = nullptr;
  if (!check_ok("hmc_get", hmc_get(ep_.peers[size_t(owner)], db.p, mine.size, rem, mine.off, &q)))
    return false;
  ++c_.posted;
  if (!wait_ok("get", &q, mine.size)) return false;
  ++c_.ops["get"];
  if (!verify("get", db, 0, mine.size, key(s, uint64_t(owner)), mine.off)) return false;
  return barrier(ep_.comm);
}

bool Worker::step_xfer(uint64_t s, Rng& r) {
  int n = ep_.n, me = ep_.rank;
  int k = 1 + int(r.below(uint64_t(n - 1)));
  bool write = r.chance(50);
  int peer = (me + k) % n, other = (me - k + n) % n;  // I act on peer; other acts on me
  struct Plan {
    std::vector<hmc_xfer_desc_t> d;
    bool dev, notify, twice;
  };
  auto plan = [&](int w, bool has_dev) {
    Rng q(mix(ep_.seed, s, uint64_t(w), 7));
    Plan p;
    size_t m = 1 + size_t(q.below(16));
    size_t cursor = size_t(q.below(max_ / 4 + 1));
    for (size_t i = 0; i < m && cursor < max_; ++i) {
      size_t room = max_ - cursor;
      size_t sz = std::min(room, q.size(std::max<size_t>(1, max_ / (2 * m))));
      hmc_xfer_desc_t d{cursor, cursor, sz};
      // Sometimes adjacent (merged by hmc), mostly with a gap.
      cursor += sz + (q.chance(30) ? 0 : size_t(q.below(4096)) + 1);
      p.d.push_back(d);
    }
    std::reverse(p.d.begin(), p.d.end());  // out of order on purpose
    p.dev = q.chance(50) && has_dev;
    p.notify = q.chance(50);
    p.twice = write && q.chance(25);
    return p;
  };
  Plan mine = plan(me, ep_.remote_d[size_t(peer)] != nullptr);
  Plan theirs = plan(other, rma_d_.p != nullptr);
  uint64_t value = ((ep_.number & 0xffffffff) << 32) | (s & 0xffffffff);
  Buf region = theirs.dev ? rma_d_ : rma_h_;
  if (write) {
    for (auto& d : mine.d)
      fill(key(s, uint64_t(me)), d.remote_offset, d.size, xloc_.at(d.local_offset));
  } else {
    for (auto& d : theirs.d)
      put_pattern(region, d.remote_offset, key(s, uint64_t(me)), d.remote_offset, d.size);
    if (!barrier(ep_.comm)) return false;
  }
  hmc_remote_t rem = mine.dev ? ep_.remote_d[size_t(peer)] : ep_.remote_h[size_t(peer)];
  hmc_xfer_list_t list = nullptr;
  if (!check_ok("hmc_xfer_prepare",
                hmc_xfer_prepare(ep_.reg_x, rem, write ? HMC_XFER_WRITE : HMC_XFER_READ,
                                 mine.d.data(), mine.d.size(), &list)))
    return false;
  size_t total = 0;
  for (auto& d : mine.d) total += d.size;
  hmc_request_t q1 = nullptr, q2 = nullptr;
  bool ok =
      check_ok("hmc_xfer_post", hmc_xfer_post(list, mine.notify ? HMC_XFER_NOTIFY : 0, value, &q1));
  if (ok) ++c_.posted;
  if (ok && mine.twice) {
    ok = check_ok("hmc_xfer_post again", hmc_xfer_post(list, 0, 0, &q2));
    if (ok) ++c_.posted;
  }
  if (q1) ok = wait_ok("transfer list", &q1, total) && ok;
  if (q2) ok = wait_ok("transfer list again", &q2, total) && ok;
  hmc_xfer_release(list);
  if (!ok) return false;
  // As for a put: the notification is owed only once the barrier says the list succeeded.
  if (!barrier(ep_.comm)) return false;
  if (theirs.notify && !notify_expect(other, value)) return false;
  ++c_.ops[write ? "xfer_write" : "xfer_read"];
  if (write) {
    for (auto& d : theirs.d)
      if (!verify("transfer list write", region, d.remote_offset, d.size, key(s, uint64_t(other)),
                  d.remote_offset))
        return false;
  } else {
    for (auto& d : mine.d)
      if (!verify("transfer list read", xloc_, d.local_offset, d.size, key(s, uint64_t(peer)),
                  d.remote_offset))
        return false;
  }
  return barrier(ep_.comm);
}

// Contribution of group rank j to an integer reduction: the stream's int32s, kept below 2^24 so
// that no sum of up to 128 of them overflows.
void contribution(uint64_t k, size_t pos, size_t bytes, void* out, bool mask24) {
  fill(k, pos, bytes, out);
  if (!mask24) return;
  auto* v = static_cast<int32_t*>(out);
  for (size_t i = 0; i < bytes / 4; ++i) v[i] &= 0x00ffffff;
}

bool Worker::step_collective(uint64_t s, Rng& r, hmc_comm_t comm, int me,
                             const std::vector<int>& group) {
  int n = int(group.size());
  unsigned which = unsigned(r.below(7));
  Rng local(mix(ep_.seed, s, uint64_t(group[size_t(me)]), 8));
  Buf sb = pick(local, hsend_, dsend_), rb = pick(local, hrecv_, drecv_);
  // Keys are per group rank j; the stream of the world rank group[j].
  auto kj = [&](int j) { return key(s, uint64_t(group[size_t(j)]) + 1000); };
  hmc_request_t q = nullptr;
  hmc_status_t st = HMC_SUCCESS;
  size_t check_len = 0;
  const char* name = "";
  std::vector<size_t> sc, sd, rc, rd;
  switch (which) {
    case 0: {  // all-reduce: int32 sum, int64 bxor or uint8 max; sometimes in place
      name = "all_reduce";
      unsigned v = unsigned(r.below(3));
      hmc_dtype_t dt = v == 0 ? HMC_DTYPE_I32 : v == 1 ? HMC_DTYPE_I64 : HMC_DTYPE_U8;
      hmc_reduce_op_t op = v == 0 ? HMC_OP_SUM : v == 1 ? HMC_OP_BXOR : HMC_OP_MAX;
      size_t elt = v == 0 ? 4 : v == 1 ? 8 : 1;
      size_t count = r.size(max_ / elt);
      size_t bytes = count * elt;
      bool in_place = r.chance(25);
      std::memset(exp_.data(), 0, bytes);
      for (int j = 0; j < n; ++j) {
        contribution(kj(j), 0, bytes, tmp2_.data(), v == 0);
        if (j == me) {
          Buf dst = in_place ? rb : sb;
          if (dst.dev)
            hmc_mem_copy(ctx_, dst.p, tmp2_.data(), bytes);
          else
            std::memcpy(dst.p, tmp2_.data(), bytes);
        }
        for (size_t i = 0; i < count; ++i) {
          if (v == 0)
            reinterpret_cast<int32_t*>(exp_.data())[i] +=
                reinterpret_cast<int32_t*>(tmp2_.data())[i];
          else if (v == 1)
            reinterpret_cast<uint64_t*>(exp_.data())[i] ^=
                reinterpret_cast<uint64_t*>(tmp2_.data())[i];
          else
            exp_[i] = std::max(exp_[i], tmp2_[i]);
        }
      }
      st = hmc_all_reduce(comm, in_place ? rb.p : sb.p, rb.p, count, dt, op, &q);
      check_len = bytes;
      break;
    }
    case 1: {  // all-gather of int32s
      name = "all_gather";
      size_t count = r.size(std::max<size_t>(1, max_ / (4 * size_t(n))));
      size_t bytes = count * 4;
      for (int j = 0; j < n; ++j) fill(kj(j), 0, bytes, exp_.data() + size_t(j) * bytes);
      put_pattern(sb, 0, kj(me), 0, bytes);
      st = hmc_all_gather(comm, sb.p, rb.p, count, HMC_DTYPE_I32, &q);
      check_len = bytes * size_t(n);
      break;
    }
    case 2: {  // broadcast of bytes from a random root
      name = "broadcast";
      int root = int(r.below(uint64_t(n)));
      size_t count = r.size(max_);
      fill(kj(root), 0, count, exp_.data());
      if (me == root) put_pattern(rb, 0, kj(root), 0, count);
      st = hmc_broadcast(comm, rb.p, count, HMC_DTYPE_U8, root, &q);
      check_len = count;
      break;
    }
    case 3: {  // all-to-all of int64s: block j of rank i is stream (i, j)
      name = "all_to_all";
      size_t count = r.size(std::max<size_t>(1, max_ / (8 * size_t(n))));
      size_t bytes = count * 8;
      for (int j = 0; j < n; ++j) {
        fill(mix(kj(me), uint64_t(j)), 0, bytes, tmp2_.data() + size_t(j) * bytes);
        fill(mix(kj(j), uint64_t(me)), 0, bytes, exp_.data() + size_t(j) * bytes);
      }
      if (sb.dev)
        hmc_mem_copy(ctx_, sb.p, tmp2_.data(), bytes * size_t(n));
      else
        std::memcpy(sb.p, tmp2_.data(), bytes * size_t(n));
      st = hmc_all_to_all(comm, sb.p, rb.p, count, HMC_DTYPE_I64, &q);
      check_len = bytes * size_t(n);
      break;
    }
    case 4: {  // all-to-allv of bytes, counts from (i, j), zeros included
      name = "all_to_allv";
      size_t cmax = std::max<size_t>(1, max_ / size_t(n));
      auto cnt = [&](int i, int j) {
        Rng q2(mix(ep_.seed, s, uint64_t(group[size_t(i)]), uint64_t(group[size_t(j)]) + 77));
        return q2.chance(15) ? size_t(0) : q2.size(cmax);
      };
      sc.resize(size_t(n));
      sd.resize(size_t(n));
      rc.resize(size_t(n));
      rd.resize(size_t(n));
      size_t so = 0, ro = 0;
      for (int j = 0; j < n; ++j) {
        sc[size_t(j)] = cnt(me, j);
        sd[size_t(j)] = so;
        fill(mix(kj(me), uint64_t(j)), 0, sc[size_t(j)], tmp2_.data() + so);
        so += sc[size_t(j)];
        rc[size_t(j)] = cnt(j, me);
        rd[size_t(j)] = ro;
        fill(mix(kj(j), uint64_t(me)), 0, rc[size_t(j)], exp_.data() + ro);
        ro += rc[size_t(j)];
      }
      if (sb.dev)
        hmc_mem_copy(ctx_, sb.p, tmp2_.data(), so);
      else
        std::memcpy(sb.p, tmp2_.data(), so);
      st = hmc_all_to_allv(comm, sb.p, sc.data(), sd.data(), rb.p, rc.data(), rd.data(),
                           HMC_DTYPE_U8, &q);
      check_len = ro;
      break;
    }
    case 5: {  // reduce-scatter: int32 sum
      name = "reduce_scatter";
      size_t count = r.size(std::max<size_t>(1, max_ / (4 * size_t(n))));
      size_t bytes = count * 4;
      std::memset(exp_.data(), 0, bytes);
      for (int j = 0; j < n; ++j) {
        contribution(kj(j), size_t(me) * bytes, bytes, tmp2_.data(), true);
        for (size_t i = 0; i < count; ++i)
          reinterpret_cast<int32_t*>(exp_.data())[i] += reinterpret_cast<int32_t*>(tmp2_.data())[i];
      }
      contribution(kj(me), 0, bytes * size_t(n), tmp2_.data(), true);
      if (sb.dev)
        hmc_mem_copy(ctx_, sb.p, tmp2_.data(), bytes * size_t(n));
      else
        std::memcpy(sb.p, tmp2_.data(), bytes * size_t(n));
      st = hmc_reduce_scatter(comm, sb.p, rb.p, count, HMC_DTYPE_I32, HMC_OP_SUM, &q);
      check_len = bytes;
      break;
    }
    default:
      name = "barrier";
      st = hmc_barrier(comm, &q);
      break;
  }
  if (st != HMC_SUCCESS) return fail(std::string("hmc_") + name, st);
  ++c_.posted;
  if (!wait_ok(name, &q, SIZE_MAX)) return false;
  ++c_.ops[name];
  if (!check_len) return true;
  return verify_expected(name, rb, check_len);
}

bool Worker::step_split(uint64_t s, Rng& r) {
  int n = ep_.n, me = ep_.rank;
  auto color = [&](int j) { return int(Rng(mix(ep_.seed, s, uint64_t(j), 9)).below(2)); };
  std::vector<int> group;
  for (int j = 0; j < n; ++j)
    if (color(j) == color(me)) group.push_back(j);
  int sub_rank = int(std::find(group.begin(), group.end(), me) - group.begin());
  hmc_comm_t sub = nullptr;
  if (!check_ok("hmc_comm_split", hmc_comm_split(ep_.comm, color(me), me, &sub))) return false;
  ++c_.comms_split;
  int got_rank = -1, got_size = -1;
  hmc_comm_rank(sub, &got_rank);
  hmc_comm_size(sub, &got_size);
  bool ok = true;
  if (got_rank != sub_rank || got_size != int(group.size())) {
    ++c_.corrupted;
    ok = fail("hmc_comm_split: rank " + std::to_string(got_rank) + " of " +
                  std::to_string(got_size) + ", expected " + std::to_string(sub_rank) + " of " +
                  std::to_string(group.size()),
              HMC_ERR_INTERNAL);
  }
  if (ok) ok = step_collective(s, r, sub, sub_rank, group);
  hmc_status_t st = hmc_comm_destroy(sub);
  if (st != HMC_SUCCESS) fail("hmc_comm_destroy (split)", st);
  if (ok) ++c_.ops["split"];
  return ok && st == HMC_SUCCESS;
}

}  // namespace

int worker_main(const WorkerSetup& setup) {
  fcntl(setup.cmd_fd, F_SETFL, fcntl(setup.cmd_fd, F_GETFL) | O_NONBLOCK);
  Worker w(setup);
  return w.run();
}

}  // namespace soak

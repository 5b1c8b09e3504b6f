// ucx-tag-stream: a one-way stream of tagged messages over raw UCP, without hmc, to tell UCX's own
// cost from net-ucx's. Two processes on this host (the parent forks the receiver; worker addresses
// cross a socketpair). Both sides spin on ucp_worker_progress, as ucx_perftest and hmc-perf do.
//
//   --window W      sends in flight on the sender, receives posted on the receiver   [16]
//   --tags same     every message carries one tag (ucx_perftest tag_bw)
//   --tags distinct message i carries tag i (hmc-perf through net-ucx)              [same]
//   --features F    tag, or tag,rma,wakeup (what net-ucx asks UCX for)              [tag]
//   --err peer      endpoints with UCP_ERR_HANDLING_MODE_PEER (ucx_perftest -e)      [none]
//   --multi-send    sends carry UCP_OP_ATTR_FLAG_MULTI_SEND (ucx_perftest's bw tests)
//   --pingpong      a ping-pong instead of the stream (the window is unused): reports half the
//                   round trip, average and median, like hmc-perf's lat test
//
// UCX_TLS and UCX_NET_DEVICES apply as usual. The stream reports MB/s (10^6 bytes per second) from
// the first measured send to the receiver's acknowledgement of the last message; the ping-pong
// reports half the round trip in microseconds (average, median, how many took over 100 us).
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Opts {
  size_t size = size_t{4} << 20;
  long iters = 1000;
  long warmup = 100;
  int window = 16;
  bool distinct_tags = false;
  bool rma_wakeup = false;
  bool err_peer = false;
  bool multi_send = false;
  bool pingpong = false;
  int timeout_s = 60;
};

[[noreturn]] void die(const char* what, const char* why) {
  std::fprintf(stderr, "ucx-tag-stream: %s: %s\n", what, why);
  std::exit(1);
}

void check(const char* what, ucs_status_t st) {
  if (st != UCS_OK) die(what, ucs_status_string(st));
}

size_t parse_size(const char* s) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s) die("bad size", s);
  switch (*end) {
    case 'K':
    case 'k': v <<= 10; break;
    case 'M':
    case 'm': v <<= 20; break;
    case 'G':
    case 'g': v <<= 30; break;
    case '\0': break;
    default: die("bad size", s);
  }
  return static_cast<size_t>(v);
}

void usage(int rc) {
  std::fprintf(
      rc == 0 ? stdout : stderr,
      "usage: ucx-tag-stream [--size N] [--iters N] [--warmup N] [--window W]\n"
      "                      [--tags same|distinct] [--features tag|tag,rma,wakeup]\n"
      "                      [--err none|peer] [--multi-send] [--pingpong] [--timeout S]\n"
      "A one-way stream of tagged messages between two processes over raw UCP (no hmc), or\n"
      "with --pingpong a ping-pong. UCX_TLS and UCX_NET_DEVICES apply. Prints MB/s (10^6\n"
      "bytes/s), or for --pingpong half the round trip in microseconds (average, median).\n");
  std::exit(rc);
}

Opts parse(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die("missing value after", argv[i]);
      return argv[++i];
    };
    if (a == "--help" || a == "-h")
      usage(0);
    else if (a == "--size")
      o.size = parse_size(next());
    else if (a == "--iters")
      o.iters = std::atol(next());
    else if (a == "--warmup")
      o.warmup = std::atol(next());
    else if (a == "--window")
      o.window = std::atoi(next());
    else if (a == "--timeout")
      o.timeout_s = std::atoi(next());
    else if (a == "--multi-send")
      o.multi_send = true;
    else if (a == "--pingpong")
      o.pingpong = true;
    else if (a == "--tags") {
      std::string v = next();
      if (v != "same" && v != "distinct") die("--tags takes same or distinct, not", v.c_str());
      o.distinct_tags = v == "distinct";
    } else if (a == "--features") {
      std::string v = next();
      if (v != "tag" && v != "tag,rma,wakeup")
        die("--features takes tag or tag,rma,wakeup, not", v.c_str());
      o.rma_wakeup = v != "tag";
    } else if (a == "--err") {
      std::string v = next();
      if (v != "none" && v != "peer") die("--err takes none or peer, not", v.c_str());
      o.err_peer = v == "peer";
    } else {
      std::fprintf(stderr, "ucx-tag-stream: unknown option %s\n\n", a.c_str());
      usage(2);
    }
  }
  if (o.size == 0 || o.iters <= 0 || o.warmup < 0 || o.window <= 0 || o.timeout_s <= 0)
    die("bad arguments", "size, iters and window must be positive");
  return o;
}

// Whole-buffer transfers over the socketpair (addresses, the start signal).
void put_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w <= 0) die("socketpair write", std::strerror(errno));
    c += w;
    n -= static_cast<size_t>(w);
  }
}
void get_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n);
    if (r <= 0) die("socketpair read", r == 0 ? "peer closed" : std::strerror(errno));
    c += r;
    n -= static_cast<size_t>(r);
  }
}

struct Ucp {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;

  explicit Ucp(const Opts& o) {
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG | (o.rma_wakeup ? UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP : 0);
    check("ucp_init", ucp_init(&p, nullptr, &ctx));
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    check("ucp_worker_create", ucp_worker_create(ctx, &wp, &worker));
  }
  // Exchanges worker addresses over fd and connects to the peer.
  void connect(int fd, const Opts& o) {
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    check("ucp_worker_get_address", ucp_worker_get_address(worker, &addr, &len));
    uint64_t n = len;
    put_all(fd, &n, sizeof(n));
    put_all(fd, addr, len);
    ucp_worker_release_address(worker, addr);
    get_all(fd, &n, sizeof(n));
    std::vector<char> peer(n);
    get_all(fd, peer.data(), n);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    ep.err_mode = o.err_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    check("ucp_ep_create", ucp_ep_create(worker, &ep, &this->ep));
  }
  ~Ucp() {
    if (ep) {
      // Forced: the peer may already be gone, and nothing is left to flush (every operation
      // was waited for). Still bounded, like every wait here.
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(ep, &p);
      if (UCS_PTR_IS_PTR(r)) {
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (ucp_request_check_status(r) == UCS_INPROGRESS &&
               std::chrono::steady_clock::now() < end)
          ucp_worker_progress(worker);
        ucp_request_free(r);
      }
    }
    if (worker) ucp_worker_destroy(worker);
    if (ctx) ucp_cleanup(ctx);
  }
};

using Clock = std::chrono::steady_clock;

struct Deadline {
  Clock::time_point end;
  explicit Deadline(int s) : end(Clock::now() + std::chrono::seconds(s)) {}
  void check(const char* what) const {
    if (Clock::now() > end) die("timed out", what);
  }
};

// Spins until request r (a pointer from a *_nbx call, or an immediate status) ends.
void wait(Ucp& u, void* r, const Deadline& d, const char* what) {
  if (!UCS_PTR_IS_PTR(r)) {
    check(what, UCS_PTR_STATUS(r));
    return;
  }
  unsigned turns = 0;
  ucs_status_t st;
  while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
    ucp_worker_progress(u.worker);
    if ((++turns & 1023) == 0) d.check(what);
  }
  ucp_request_free(r);
  check(what, st);
}

constexpr ucp_tag_t kTag = 0x1337;
constexpr ucp_tag_t kAckTag = ~ucp_tag_t{0};

ucp_tag_t tag_of(const Opts& o, long i) {
  return o.distinct_tags ? kTag + static_cast<ucp_tag_t>(i) : kTag;
}

void receiver(const Opts& o, int fd) {
  Ucp u(o);
  u.connect(fd, o);
  std::vector<char> buf(o.size);
  ucp_request_param_t p{};
  long total = o.warmup + o.iters;
  std::vector<void*> reqs(static_cast<size_t>(o.window), nullptr);
  char go = 1;
  put_all(fd, &go, 1);
  Deadline d(o.timeout_s);
  long posted = 0;
  for (long i = 0; i < total; ++i) {
    while (posted < total && posted < i + o.window) {
      reqs[static_cast<size_t>(posted % o.window)] =
          ucp_tag_recv_nbx(u.worker, buf.data(), o.size, tag_of(o, posted), ~ucp_tag_t{0}, &p);
      ++posted;
    }
    wait(u, reqs[static_cast<size_t>(i % o.window)], d, "a receive");
  }
  char ack = 1;
  wait(u, ucp_tag_send_nbx(u.ep, &ack, 1, kAckTag, &p), d, "the acknowledgement");
}

double sender(const Opts& o, int fd) {
  Ucp u(o);
  u.connect(fd, o);
  std::vector<char> buf(o.size, 'x');
  ucp_request_param_t p{};
  if (o.multi_send) p.op_attr_mask = UCP_OP_ATTR_FLAG_MULTI_SEND;
  char go = 0;
  get_all(fd, &go, 1);
  Deadline d(o.timeout_s);
  std::vector<void*> reqs(static_cast<size_t>(o.window), nullptr);
  long total = o.warmup + o.iters;
  Clock::time_point t0 = Clock::now();
  for (long i = 0; i < total; ++i) {
    if (i == o.warmup) {
      // The warm-up's last messages are still in flight: measuring starts from a full window.
      t0 = Clock::now();
    }
    void*& slot = reqs[static_cast<size_t>(i % o.window)];
    if (slot != nullptr) wait(u, slot, d, "a send");
    slot = ucp_tag_send_nbx(u.ep, buf.data(), o.size, tag_of(o, i), &p);
    if (!UCS_PTR_IS_PTR(slot)) {
      check("a send", UCS_PTR_STATUS(slot));
      slot = nullptr;
    }
  }
  for (void* r : reqs)
    if (r != nullptr) wait(u, r, d, "a send");
  char ack = 0;
  wait(u, ucp_tag_recv_nbx(u.worker, &ack, 1, kAckTag, ~ucp_tag_t{0}, &p), d,
       "the acknowledgement");
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(o.size) * static_cast<double>(o.iters) / s / 1e6;
}

// --pingpong, the answering side: replies to message i with tag i, then posts the receive of
// message i+1 while the reply is on its way (as hmc-perf's server does).
void ponger(const Opts& o, int fd) {
  Ucp u(o);
  u.connect(fd, o);
  std::vector<char> rx(o.size), tx(o.size, 'y');
  ucp_request_param_t p{};
  long total = o.warmup + o.iters;
  void* r = ucp_tag_recv_nbx(u.worker, rx.data(), o.size, tag_of(o, 0), ~ucp_tag_t{0}, &p);
  char go = 1;
  put_all(fd, &go, 1);
  Deadline d(o.timeout_s);
  for (long i = 0; i < total; ++i) {
    wait(u, r, d, "a ping");
    void* s = ucp_tag_send_nbx(u.ep, tx.data(), o.size, tag_of(o, i), &p);
    if (i + 1 < total)
      r = ucp_tag_recv_nbx(u.worker, rx.data(), o.size, tag_of(o, i + 1), ~ucp_tag_t{0}, &p);
    wait(u, s, d, "a reply");
  }
}

// --pingpong, the timing side: half of each round trip, in microseconds.
std::vector<double> pinger(const Opts& o, int fd) {
  Ucp u(o);
  u.connect(fd, o);
  std::vector<char> rx(o.size), tx(o.size, 'x');
  ucp_request_param_t p{};
  char go = 0;
  get_all(fd, &go, 1);
  Deadline d(o.timeout_s);
  std::vector<double> half;
  half.reserve(static_cast<size_t>(o.iters));
  long total = o.warmup + o.iters;
  for (long i = 0; i < total; ++i) {
    Clock::time_point t0 = Clock::now();
    void* s = ucp_tag_send_nbx(u.ep, tx.data(), o.size, tag_of(o, i), &p);
    void* r = ucp_tag_recv_nbx(u.worker, rx.data(), o.size, tag_of(o, i), ~ucp_tag_t{0}, &p);
    wait(u, r, d, "a reply");
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
    wait(u, s, d, "a ping");
    if (i >= o.warmup) half.push_back(us);
  }
  return half;
}
}  // namespace

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair", std::strerror(errno));
  pid_t child = fork();
  if (child < 0) die("fork", std::strerror(errno));
  if (child == 0) {
    close(sv[0]);
    if (o.pingpong)
      ponger(o, sv[1]);
    else
      receiver(o, sv[1]);
    std::_Exit(0);
  }
  close(sv[1]);
  double mbps = 0;
  std::vector<double> half;
  if (o.pingpong)
    half = pinger(o, sv[0]);
  else
    mbps = sender(o, sv[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("the receiver", "failed");
  if (o.pingpong) {
    double sum = 0, max = 0;
    long slow = 0;
    for (double v : half) {
      sum += v;
      max = std::max(max, v);
      slow += v > 100 ? 1 : 0;
    }
    std::nth_element(half.begin(), half.begin() + static_cast<long>(half.size() / 2), half.end());
    std::printf(
        "size %zu iters %ld pingpong tags %s features %s err %s: %ld over 100 us, "
        "max %.1f us; avg %.3f us median %.3f us\n",
        o.size, o.iters, o.distinct_tags ? "distinct" : "same",
        o.rma_wakeup ? "tag,rma,wakeup" : "tag", o.err_peer ? "peer" : "none", slow, max,
        sum / static_cast<double>(half.size()), half[half.size() / 2]);
    return 0;
  }
  std::printf("size %zu iters %ld window %d tags %s features %s err %s: %.1f MB/s\n", o.size,
              o.iters, o.window, o.distinct_tags ? "distinct" : "same",
              o.rma_wakeup ? "tag,rma,wakeup" : "tag", o.err_peer ? "peer" : "none", mbps);
  return 0;
}

// ofi-rdm-pingpong: a ping-pong over raw libfabric RDM endpoints, without hmc, to tell the
// provider's own cost from net-ofi's. Two processes on this host (the parent forks the peer;
// addresses and keys cross a socketpair). Each side waits by spinning on its CQ, as hmc-perf does.
//
//   --mode tsend   the message is one fi_tsend/fi_trecv (the provider's own large-message
//                  protocol; rxm: rendezvous by read)
//   --mode write   the receiver registered its buffer once at start; each message is an
//                  fi_write into it plus a small fi_tsend behind it (FI_ORDER_SAW), which the
//                  receiver waits for: net-ofi's write rendezvous without the RTS/CTS trip
//   --mode rndv    write, plus net-ofi's trip per message: an RTS from the sender, then the
//                  receiver registers the buffer and answers a CTS with the key
//   --mode cts     rndv with the buffer registered once (the trip without the registration)
//   --chunk N      the data as fi_writes of at most N bytes (--serial: one after another)
//
// Reports, like hmc-perf's lat test, half the round trip and size / that in MB/s.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

enum class Mode { kTsend, kWrite, kRndv, kCts };

struct Opts {
  Mode mode = Mode::kWrite;
  size_t size = size_t{4} << 20;
  long iters = 1000;
  long warmup = 100;
  std::string provider = "tcp";
  int timeout_s = 60;
  size_t chunk = 0;     // write/rndv/cts: largest single fi_write (0: the whole message)
  bool serial = false;  // wait for each fi_write to complete before posting the next
};

[[noreturn]] void die(const char* what, long rc) {
  std::fprintf(stderr, "ofi-rdm-pingpong: %s: %s (%ld)\n", what,
               rc < 0 ? fi_strerror(static_cast<int>(-rc)) : "failed", rc);
  std::exit(1);
}

void check(const char* what, long rc) {
  if (rc != 0) die(what, rc);
}

void xfer(int fd, void* p, size_t n, bool out) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t k = out ? write(fd, b, n) : read(fd, b, n);
    if (k <= 0) die(out ? "bootstrap write" : "bootstrap read", -1);
    b += k;
    n -= static_cast<size_t>(k);
  }
}

// The tags: data (the message or the FIN behind a write), RTS, CTS.
constexpr uint64_t kTagData = 1, kTagRts = 2, kTagCts = 3;

struct Side {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::vector<uint8_t> buf;  // the message buffer (sent from and received into)
  fid_mr* buf_mr = nullptr;
  uint8_t ctrl[64] = {};  // small messages in and out
  fid_mr* ctrl_mr = nullptr;
  fi_context2 ctx[4];
  std::chrono::steady_clock::time_point deadline;

  void* desc(fid_mr* mr) const { return mr != nullptr ? fi_mr_desc(mr) : nullptr; }

  // Spins until `want` completions arrived.
  void wait(int want) {
    fi_cq_tagged_entry e[8];
    while (want > 0) {
      ssize_t n = fi_cq_read(cq, e, 8);
      if (n > 0) {
        want -= static_cast<int>(n);
        continue;
      }
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        die(fi_cq_strerror(cq, err.prov_errno, err.err_data, nullptr, 0), -err.err);
      }
      if (n != -FI_EAGAIN) die("fi_cq_read", n);
      if (std::chrono::steady_clock::now() > deadline) die("timed out waiting for the peer", -1);
    }
  }

  fid_mr* reg(void* p, size_t n, uint64_t access) {
    fid_mr* mr = nullptr;
    fi_mr_attr attr{};
    iovec iov{p, n};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = access;
    attr.requested_key = static_cast<uint64_t>(std::rand());
    check("fi_mr_regattr", fi_mr_regattr(domain, &attr, 0, &mr));
    if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      check("fi_mr_bind", fi_mr_bind(mr, &ep->fid, 0));
      check("fi_mr_enable", fi_mr_enable(mr));
    }
    return mr;
  }

  uint64_t remote_addr_of(void* p) const {
    return (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uintptr_t>(p) : 0;
  }

  void open(const Opts& o, int boot) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED | FI_RMA;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
    hints->rx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
    hints->fabric_attr->prov_name = strdup(o.provider.c_str());
    check("fi_getinfo", fi_getinfo(FI_VERSION(1, 14), "127.0.0.1", nullptr, 0, hints, &info));
    fi_freeinfo(hints);
    check("fi_fabric", fi_fabric(info->fabric_attr, &fabric, nullptr));
    check("fi_domain", fi_domain(fabric, info, &domain, nullptr));
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.size = 64;
    check("fi_cq_open", fi_cq_open(domain, &cq_attr, &cq, nullptr));
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    check("fi_av_open", fi_av_open(domain, &av_attr, &av, nullptr));
    check("fi_endpoint", fi_endpoint(domain, info, &ep, nullptr));
    check("fi_ep_bind cq", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    check("fi_ep_bind av", fi_ep_bind(ep, &av->fid, 0));
    check("fi_enable", fi_enable(ep));
    uint8_t addr[256];
    size_t len = sizeof addr;
    check("fi_getname", fi_getname(&ep->fid, addr, &len));
    xfer(boot, &len, sizeof len, true);
    xfer(boot, addr, len, true);
    uint8_t peer_addr[256];
    size_t peer_len = 0;
    xfer(boot, &peer_len, sizeof peer_len, false);
    if (peer_len > sizeof peer_addr) die("peer address too long", -1);
    xfer(boot, peer_addr, peer_len, false);
    if (fi_av_insert(av, peer_addr, 1, &peer, 0, nullptr) != 1) die("fi_av_insert", -1);
    buf.assign(o.size, 0xa5);
    buf_mr = reg(buf.data(), buf.size(), FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_WRITE);
    ctrl_mr = reg(ctrl, sizeof ctrl, FI_SEND | FI_RECV);
  }

  void close_all() {
    fi_close(&ctrl_mr->fid);
    fi_close(&buf_mr->fid);
    fi_close(&ep->fid);
    fi_close(&av->fid);
    fi_close(&cq->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
  }

  void post_recv(void* p, size_t n, fid_mr* mr, uint64_t tag, int slot) {
    for (;;) {
      ssize_t rc = fi_trecv(ep, p, n, desc(mr), peer, tag, 0, &ctx[slot]);
      if (rc == 0) return;
      if (rc != -FI_EAGAIN) die("fi_trecv", rc);
      fi_cq_read(cq, nullptr, 0);
    }
  }
  void post_send(const void* p, size_t n, fid_mr* mr, uint64_t tag, int slot) {
    for (;;) {
      ssize_t rc = fi_tsend(ep, p, n, desc(mr), peer, tag, &ctx[slot]);
      if (rc == 0) return;
      if (rc != -FI_EAGAIN) die("fi_tsend", rc);
      fi_cq_read(cq, nullptr, 0);
    }
  }
  // Posts the message as fi_writes of at most `chunk` bytes; returns how many.
  int post_writes(uint64_t raddr, uint64_t key, size_t chunk, bool serial) {
    if (chunk == 0) chunk = buf.size();
    int n = 0;
    for (size_t off = 0; off < buf.size(); off += chunk, ++n) {
      size_t len = std::min(chunk, buf.size() - off);
      wctx.resize(static_cast<size_t>(n) + 1);
      for (;;) {
        ssize_t rc = fi_write(ep, buf.data() + off, len, desc(buf_mr), peer, raddr + off, key,
                              &wctx[static_cast<size_t>(n)]);
        if (rc == 0) break;
        if (rc != -FI_EAGAIN) die("fi_write", rc);
        fi_cq_read(cq, nullptr, 0);
      }
      if (serial) wait(1);
    }
    return serial ? 0 : n;
  }
  std::vector<fi_context2> wctx;
};

// One message from this side; the peer runs recv_one.
void send_one(Side& s, const Opts& o, uint64_t* raddr, uint64_t* key) {
  if (o.mode == Mode::kTsend) {
    s.post_send(s.buf.data(), s.buf.size(), s.buf_mr, kTagData, 0);
    s.wait(1);
    return;
  }
  if (o.mode == Mode::kRndv || o.mode == Mode::kCts) {  // RTS out, CTS {address, key} back
    s.post_recv(s.ctrl + 32, 16, s.ctrl_mr, kTagCts, 1);
    s.post_send(s.ctrl, 8, s.ctrl_mr, kTagRts, 0);
    s.wait(2);
    std::memcpy(raddr, s.ctrl + 32, 8);
    std::memcpy(key, s.ctrl + 40, 8);
  }
  int writes = s.post_writes(*raddr, *key, o.chunk, o.serial);
  s.post_send(s.ctrl, 8, s.ctrl_mr, kTagData, 3);
  s.wait(writes + 1);
}

void recv_one(Side& s, const Opts& o) {
  if (o.mode == Mode::kTsend) {
    s.post_recv(s.buf.data(), s.buf.size(), s.buf_mr, kTagData, 0);
    s.wait(1);
    return;
  }
  fid_mr* mr = nullptr;
  if (o.mode == Mode::kRndv || o.mode == Mode::kCts) {  // wait for the RTS, expose, answer
    s.post_recv(s.ctrl, 8, s.ctrl_mr, kTagRts, 0);
    s.wait(1);
    mr = o.mode == Mode::kRndv ? s.reg(s.buf.data(), s.buf.size(), FI_RECV | FI_REMOTE_WRITE)
                               : s.buf_mr;
    uint64_t raddr = s.remote_addr_of(s.buf.data()), key = fi_mr_key(mr);
    std::memcpy(s.ctrl + 32, &raddr, 8);
    std::memcpy(s.ctrl + 40, &key, 8);
    s.post_recv(s.ctrl + 48, 8, s.ctrl_mr, kTagData, 1);
    s.post_send(s.ctrl + 32, 16, s.ctrl_mr, kTagCts, 2);
    s.wait(2);
    if (mr != s.buf_mr) fi_close(&mr->fid);
    return;
  }
  s.post_recv(s.ctrl + 48, 8, s.ctrl_mr, kTagData, 1);
  s.wait(1);
}

int run(const Opts& o, int boot, bool client) {
  Side s;
  s.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  s.open(o, boot);
  // write: each side's buffer, registered once, is the peer's target.
  uint64_t mine[2] = {s.remote_addr_of(s.buf.data()), fi_mr_key(s.buf_mr)}, theirs[2] = {};
  xfer(boot, mine, sizeof mine, true);
  xfer(boot, theirs, sizeof theirs, false);
  uint64_t raddr = theirs[0], key = theirs[1];
  std::chrono::steady_clock::time_point t0;
  for (long i = 0; i < o.warmup + o.iters; ++i) {
    if (i == o.warmup) t0 = std::chrono::steady_clock::now();
    if (client) {
      send_one(s, o, &raddr, &key);
      recv_one(s, o);
    } else {
      recv_one(s, o);
      send_one(s, o, &raddr, &key);
    }
  }
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      (2.0 * static_cast<double>(o.iters));
  if (client)
    std::printf("%s %s %zu bytes: %.2f us one way, %.2f MB/s\n", o.provider.c_str(),
                o.mode == Mode::kTsend   ? "tsend"
                : o.mode == Mode::kWrite ? "write"
                : o.mode == Mode::kRndv  ? "rndv"
                                         : "cts",
                o.size, us, static_cast<double>(o.size) / us);
  char done = 1;
  xfer(boot, &done, 1, true);  // neither side closes while the other still needs it
  xfer(boot, &done, 1, false);
  s.close_all();
  return 0;
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: ofi-rdm-pingpong [--mode tsend|write|rndv|cts] [--size BYTES] [--iters N]\n"
               "                        [--warmup N] [--chunk BYTES] [--serial] [--provider NAME]\n"
               "                        [--timeout S]\n"
               "A ping-pong between two processes of this host over raw libfabric RDM\n"
               "endpoints (no hmc), to measure the provider's own cost. Modes:\n"
               "  tsend  one fi_tsend per message (the provider's large-message protocol)\n"
               "  write  fi_write into a buffer registered once, then a small fi_tsend that\n"
               "         the receiver waits for (net-ofi's write rendezvous without RTS/CTS)\n"
               "  rndv   write, plus an RTS and a CTS with a per-message registration [write]\n"
               "  cts    rndv with the buffer registered once\n"
               "--chunk  write the data as fi_writes of at most BYTES, all posted at once\n"
               "--serial post each piece when the previous one completed (as net-ofi does)\n"
               "Defaults: --size 4194304 --iters 1000 --warmup 100 --provider tcp --timeout 60\n");
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ofi-rdm-pingpong: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](long lo) {
      std::string v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < lo) {
        std::fprintf(stderr, "ofi-rdm-pingpong: %s wants an integer >= %ld, got '%s'\n", a.c_str(),
                     lo, v.c_str());
        std::exit(2);
      }
      return n;
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--mode") {
      std::string m = value();
      if (m == "tsend")
        o.mode = Mode::kTsend;
      else if (m == "write")
        o.mode = Mode::kWrite;
      else if (m == "rndv")
        o.mode = Mode::kRndv;
      else if (m == "cts")
        o.mode = Mode::kCts;
      else {
        std::fprintf(stderr, "ofi-rdm-pingpong: --mode wants tsend, write, rndv or cts\n");
        return 2;
      }
    } else if (a == "--size") {
      o.size = static_cast<size_t>(number(1));
    } else if (a == "--iters") {
      o.iters = number(1);
    } else if (a == "--warmup") {
      o.warmup = number(0);
    } else if (a == "--serial") {
      o.serial = true;
    } else if (a == "--chunk") {
      o.chunk = static_cast<size_t>(number(1));
    } else if (a == "--provider") {
      o.provider = value();
    } else if (a == "--timeout") {
      o.timeout_s = static_cast<int>(number(1));
    } else {
      std::fprintf(stderr, "ofi-rdm-pingpong: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair", -1);
  pid_t pid = fork();
  if (pid < 0) die("fork", -1);
  if (pid == 0) {
    ::close(sv[0]);
    std::exit(run(o, sv[1], false));
  }
  ::close(sv[1]);
  int rc = run(o, sv[0], true);
  int status = 0;
  waitpid(pid, &status, 0);
  return rc != 0 ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

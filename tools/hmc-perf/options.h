// hmc-perf command line: the options, their parsing and validation, and the per-size schedule
// (iterations, warmup, window) derived from them. Pure code, no hmc calls, so that the unit test
// tests/unit/tools_perf_options_test.cpp can include it.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace hmc::perf {

enum class Mode { None, Listen, Connect, Loopback, Peer };
enum class Test { Bw, Lat };
enum class Op { Send, Put, Get };
enum class Format { Table, Json };

inline const char* to_string(Test t) {
  return t == Test::Bw ? "bw" : "lat";
}
inline const char* to_string(Op o) {
  return o == Op::Send ? "send" : o == Op::Put ? "put" : "get";
}

// Most sizes one run measures (--sizes 1:1G is 31).
constexpr size_t kMaxSizes = 64;
// Largest window accepted.
constexpr int64_t kMaxWindow = 1024;

struct Options {
  Mode mode = Mode::None;
  bool help = false;
  // Transport role.
  uint16_t listen_port = 0;
  std::string bind = "127.0.0.1";
  std::string connect;           // HOST:PORT
  std::string peer_address_hex;  // hidden: the loopback child's way back to its parent
  long parent_pid = 0;           // hidden: the loopback child checks its parent is still there
  bool forever = false;          // server: serve clients until killed
  // What to measure.
  Test test = Test::Bw;
  Op op = Op::Send;
  std::vector<uint64_t> sizes;  // filled with {8} when neither --size nor --sizes is given
  int64_t iters = 0;            // 0: by size (default_iters)
  int64_t warmup = -1;          // -1: by iterations (default_warmup)
  int64_t window = 0;           // 0: by size (default_window)
  std::string mem = "host";
  std::string peer_mem = "host";
  std::string net;   // sets HMC_NET_PLUGINS
  std::string path;  // sets HMC_PATH
  bool check = false;
  Format format = Format::Table;
  std::string samples;  // lat: write every sample to this file ("" none)
  int timeout_ms = 10000;
  int progress_thread = 0;
  bool quiet = false;
  // Which options were given, to reject those that do not apply to a mode.
  std::vector<std::string> given;
};

// Parses "4096", "64K", "4M", "1G" (powers of 1024; "KiB" style accepted). False on garbage,
// zero is accepted here (callers decide), overflow is rejected.
inline bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return false;
  std::string suffix(end);
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B" || suffix == "b")
    mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    mult = 1ull << 30;
  else
    return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

// "4M" for exact multiples, else the number: for table rows and progress lines.
inline std::string size_text(uint64_t n) {
  if (n >= (1ull << 30) && n % (1ull << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n >= (1ull << 20) && n % (1ull << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= (1ull << 10) && n % (1ull << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

inline bool parse_int(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// "A:B": A, 2A, 4A ... up to B. Both sizes >= 1, A <= B.
inline bool parse_size_range(const std::string& text, std::vector<uint64_t>* out,
                             std::string* err) {
  auto colon = text.find(':');
  uint64_t a = 0, b = 0;
  if (colon == std::string::npos || !parse_size(text.substr(0, colon), &a) ||
      !parse_size(text.substr(colon + 1), &b)) {
    *err = "--sizes wants MIN:MAX (sizes with optional K/M/G), got '" + text + "'";
    return false;
  }
  if (a == 0 || a > b) {
    *err = "--sizes " + text + ": need 1 <= MIN <= MAX";
    return false;
  }
  out->clear();
  for (uint64_t s = a; s <= b; s *= 2) {
    out->push_back(s);
    if (out->size() > kMaxSizes) {
      *err = "--sizes " + text + ": more than " + std::to_string(kMaxSizes) + " sizes";
      return false;
    }
    if (s > UINT64_MAX / 2) break;
  }
  return true;
}

// Iterations when --iters is not given: enough for a stable figure, few enough that
// --sizes 1:4M takes seconds. bw moves about 256 MiB per size, at most 10000 messages; lat
// makes at most 10000 round trips.
inline int64_t default_iters(Test test, uint64_t size) {
  if (test == Test::Bw)
    return std::clamp<int64_t>(static_cast<int64_t>((256ull << 20) / size), 16, 10000);
  return std::clamp<int64_t>(static_cast<int64_t>((64ull << 20) / size), 16, 10000);
}
inline int64_t default_warmup(int64_t iters) {
  return std::clamp<int64_t>(iters / 10, 2, 1000);
}
// Requests in flight for bw when --window is not given: 16 for small messages, fewer as they
// grow so the window stays near 64 MiB per side (1 for 64 MiB and up).
inline int64_t default_window(Test test, uint64_t size) {
  if (test == Test::Lat) return 1;
  return std::clamp<int64_t>(static_cast<int64_t>((64ull << 20) / size), 1, 16);
}

// One size of the run, as both processes execute it.
struct SizePlan {
  uint64_t size = 0;
  int64_t iters = 0;
  int64_t warmup = 0;
  int64_t window = 1;
};

inline std::vector<SizePlan> make_plan(const Options& o) {
  std::vector<SizePlan> plan;
  for (uint64_t s : o.sizes) {
    SizePlan p;
    p.size = s;
    p.iters = o.iters > 0 ? o.iters : default_iters(o.test, s);
    p.warmup = o.warmup >= 0 ? o.warmup : default_warmup(p.iters);
    p.window = o.test == Test::Lat ? 1 : (o.window > 0 ? o.window : default_window(o.test, s));
    plan.push_back(p);
  }
  return plan;
}

inline const char* usage_text() {
  return R"(usage: hmc-perf --loopback [options]         run both sides, the peer as a child process
       hmc-perf --listen PORT [--bind ADDR]      server: serve one client run, then exit
       hmc-perf --connect HOST:PORT [options]    client: drive the run against a server

Measures bandwidth or latency of hmc transfers between two processes.

test options (client or --loopback; the server follows the client):
  --test bw|lat        bw: stream with WINDOW requests in flight; lat: ping-pong, reports
                       half the round trip (get: the whole get)                [bw]
  --op send|put|get    two-sided send/recv, one-sided put (with notification) or get [send]
  --size N             message size, K/M/G suffixes (powers of 1024)           [8]
  --sizes A:B          every power of two from A to B (A, 2A, 4A ...)
  --iters N            measured iterations per size           [by size: seconds per run]
  --warmup N           unmeasured iterations before them                   [iters/10]
  --window N           bw: requests in flight                 [16; 64 MiB / size from 8M]
  --mem DEV            this side's buffers, a device name of hmc_mem_alloc  [host]
  --peer-mem DEV       the peer's buffers                                   [host]
  --check              fill a pattern per iteration and offset, verify every byte on
                       the receiving side (slows the run: figures are not for comparison)
  --format table|json  json: one object per size per line on stdout       [table]
  --samples FILE       lat: write every measured sample to FILE, one line each:
                       size and microseconds (to study a latency tail)
  --quiet              no progress lines on stderr

both sides:
  --net NAME           use only net plugin NAME (sets HMC_NET_PLUGINS before the context
                       is created; --loopback passes it to its peer, otherwise give it to
                       both processes)
  --path PLUGIN/DEV    force the data path (sets HMC_PATH), e.g. hoststage/tcp
  --progress-thread 0|1  0: the benchmark drives progress itself while it waits, as
                       ucx_perftest does: no hand-off to a background thread, so no wakeup
                       on the latency path and no extra busy thread per process    [0]
  --timeout MS         bound of every single wait (connect, each transfer)     [10000]
  --bind ADDR          server: control-plane address to listen on          [127.0.0.1]
  --forever            server: serve clients one after the other until killed
  --help               this text

exit status: 0 success, 1 transfer error or --check mismatch, 2 bad arguments
)";
}

// Parses argv into *o. On failure returns false with *err naming the bad argument.
inline bool parse_args(int argc, const char* const* argv, Options* o, std::string* err) {
  auto need_value = [&](int& i, const std::string& name, std::string* value) {
    std::string arg = argv[i];
    auto eq = arg.find('=');
    if (eq != std::string::npos) {
      *value = arg.substr(eq + 1);
      return true;
    }
    if (i + 1 >= argc) {
      *err = "option " + name + " needs a value";
      return false;
    }
    *value = argv[++i];
    return true;
  };
  auto set_mode = [&](Mode m, const std::string& name) {
    if (o->mode != Mode::None) {
      *err = "give only one of --listen, --connect, --loopback (" + name + " repeats the choice)";
      return false;
    }
    o->mode = m;
    return true;
  };
  bool size_given = false, sizes_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") arg = "--help";
    std::string name = arg.substr(0, arg.find('='));
    std::string v;
    int64_t n = 0;
    uint64_t u = 0;
    if (name.rfind("--", 0) != 0) {
      *err = "unexpected argument '" + arg + "'";
      return false;
    }
    static const char* flags[] = {"--help", "--loopback", "--check", "--forever", "--quiet"};
    static const char* valued[] = {
        "--listen", "--connect", "--peer-address", "--parent-pid",      "--bind",
        "--test",   "--op",      "--size",         "--sizes",           "--iters",
        "--warmup", "--window",  "--mem",          "--peer-mem",        "--net",
        "--path",   "--format",  "--timeout",      "--progress-thread", "--samples"};
    auto in = [&](const auto& list) {
      return std::any_of(std::begin(list), std::end(list),
                         [&](const char* f) { return name == f; });
    };
    bool takes_value = in(valued);
    if (!takes_value && !in(flags)) {
      *err = "unknown option " + name;
      return false;
    }
    o->given.push_back(name);
    if (!takes_value && arg.find('=') != std::string::npos) {
      *err = "option " + name + " takes no value";
      return false;
    }
    if (takes_value && !need_value(i, name, &v)) return false;
    if (name == "--help") {
      o->help = true;
    } else if (name == "--loopback") {
      if (!set_mode(Mode::Loopback, name)) return false;
    } else if (name == "--listen") {
      if (!set_mode(Mode::Listen, name)) return false;
      if (!parse_int(v, 1, 65535, &n)) {
        *err = "--listen wants a port 1..65535, got '" + v + "'";
        return false;
      }
      o->listen_port = static_cast<uint16_t>(n);
    } else if (name == "--connect") {
      if (!set_mode(Mode::Connect, name)) return false;
      auto colon = v.rfind(':');
      if (colon == std::string::npos || colon == 0 ||
          !parse_int(v.substr(colon + 1), 1, 65535, &n)) {
        *err = "--connect wants HOST:PORT, got '" + v + "'";
        return false;
      }
      o->connect = v;
    } else if (name == "--peer-address") {
      if (!set_mode(Mode::Peer, name)) return false;
      if (v.empty() || v.size() % 2 != 0 ||
          v.find_first_not_of("0123456789abcdef") != std::string::npos) {
        *err = "--peer-address wants lowercase hex";
        return false;
      }
      o->peer_address_hex = v;
    } else if (name == "--parent-pid") {
      if (!parse_int(v, 1, INT32_MAX, &n)) {
        *err = "--parent-pid wants a pid";
        return false;
      }
      o->parent_pid = static_cast<long>(n);
    } else if (name == "--bind") {
      if (v.empty()) {
        *err = "--bind wants an address";
        return false;
      }
      o->bind = v;
    } else if (name == "--forever") {
      o->forever = true;
    } else if (name == "--test") {
      if (v == "bw")
        o->test = Test::Bw;
      else if (v == "lat")
        o->test = Test::Lat;
      else {
        *err = "--test wants bw or lat, got '" + v + "'";
        return false;
      }
    } else if (name == "--op") {
      if (v == "send")
        o->op = Op::Send;
      else if (v == "put")
        o->op = Op::Put;
      else if (v == "get")
        o->op = Op::Get;
      else {
        *err = "--op wants send, put or get, got '" + v + "'";
        return false;
      }
    } else if (name == "--size") {
      if (!parse_size(v, &u) || u == 0) {
        *err = "--size wants a size >= 1 with optional K/M/G, got '" + v + "'";
        return false;
      }
      o->sizes = {u};
      size_given = true;
    } else if (name == "--sizes") {
      if (!parse_size_range(v, &o->sizes, err)) return false;
      sizes_given = true;
    } else if (name == "--iters") {
      if (!parse_int(v, 1, INT32_MAX, &n)) {
        *err = "--iters wants a count >= 1, got '" + v + "'";
        return false;
      }
      o->iters = n;
    } else if (name == "--warmup") {
      if (!parse_int(v, 0, INT32_MAX, &n)) {
        *err = "--warmup wants a count >= 0, got '" + v + "'";
        return false;
      }
      o->warmup = n;
    } else if (name == "--window") {
      if (!parse_int(v, 1, kMaxWindow, &n)) {
        *err = "--window wants 1.." + std::to_string(kMaxWindow) + ", got '" + v + "'";
        return false;
      }
      o->window = n;
    } else if (name == "--mem" || name == "--peer-mem") {
      if (v.empty() || v.size() >= 32) {
        *err = name + " wants a device name such as host or cuda:0";
        return false;
      }
      (name == "--mem" ? o->mem : o->peer_mem) = v;
    } else if (name == "--net") {
      if (v.empty()) {
        *err = "--net wants a net plugin name";
        return false;
      }
      o->net = v;
    } else if (name == "--path") {
      if (v.find('/') == std::string::npos) {
        *err = "--path wants PLUGIN/DEVICE, e.g. hoststage/tcp, got '" + v + "'";
        return false;
      }
      o->path = v;
    } else if (name == "--check") {
      o->check = true;
    } else if (name == "--format") {
      if (v == "table")
        o->format = Format::Table;
      else if (v == "json")
        o->format = Format::Json;
      else {
        *err = "--format wants table or json, got '" + v + "'";
        return false;
      }
    } else if (name == "--timeout") {
      if (!parse_int(v, 1, INT32_MAX, &n)) {
        *err = "--timeout wants milliseconds >= 1, got '" + v + "'";
        return false;
      }
      o->timeout_ms = static_cast<int>(n);
    } else if (name == "--progress-thread") {
      if (v != "0" && v != "1") {
        *err = "--progress-thread wants 0 or 1, got '" + v + "'";
        return false;
      }
      o->progress_thread = v == "1";
    } else if (name == "--samples") {
      if (v.empty()) {
        *err = "--samples wants a file name";
        return false;
      }
      o->samples = v;
    } else if (name == "--quiet") {
      o->quiet = true;
    }
  }
  if (o->help) return true;
  if (size_given && sizes_given) {
    *err = "give --size or --sizes, not both";
    return false;
  }
  if (o->sizes.empty()) o->sizes = {8};
  if (o->mode == Mode::None) {
    *err = "choose one of --loopback, --listen PORT, --connect HOST:PORT";
    return false;
  }
  // The server and the loopback child follow the client's test choice: refuse test options
  // there rather than silently ignore them.
  if (o->mode == Mode::Listen || o->mode == Mode::Peer) {
    static const char* allowed[] = {
        "--listen",  "--bind",         "--forever",    "--net",   "--path", "--progress-thread",
        "--timeout", "--peer-address", "--parent-pid", "--quiet", "--help"};
    for (const auto& g : o->given) {
      bool ok = std::any_of(std::begin(allowed), std::end(allowed),
                            [&](const char* a) { return g == a; });
      if (!ok) {
        *err = "option " + g + " is for the client: the server follows the client's choice";
        return false;
      }
    }
  } else {
    for (const auto& g : o->given) {
      if (g == "--bind" || g == "--forever") {
        *err = "option " + g + " is for the server (--listen)";
        return false;
      }
    }
  }
  if (o->mode != Mode::Peer && o->parent_pid != 0) {
    *err = "--parent-pid is internal to --loopback";
    return false;
  }
  if (!o->samples.empty() && o->test != Test::Lat) {
    *err = "--samples applies to --test lat (bw measures no single message)";
    return false;
  }
  if (o->test == Test::Lat && o->window > 1) {
    *err = "--window applies to --test bw (a ping-pong has one message in flight)";
    return false;
  }
  return true;
}

}  // namespace hmc::perf

// hmc-perf command line: the options, their parsing and validation, and the per-size schedule
// (iterations, warmup, window) derived from them. Pure code, no hmc calls, so that the unit test
// tests/unit/tools_perf_test.cpp can include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/cli.h"
#include "../common/size.h"

namespace hmc::perf {

using hmc_tools::parse_size;
using hmc_tools::size_text;

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
};

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
  -h, --help           this text
  --version            the version

exit status: 0 success, 1 transfer error or --check mismatch, 2 bad arguments
)";
}

// Parses argv into *o with CLI11 (tools/common/cli.h: --opt=value and --opt value, -h, --version
// with the version line of `version`). Bad: *err names the bad argument; Version: *err is the
// version line.
inline hmc_tools::Parsed parse_args(int argc, const char* const* argv, Options* o, std::string* err,
                                    const std::string& version = "") {
  using hmc_tools::one_of;
  using hmc_tools::whole_in;
  CLI::App app("hmc-perf", "hmc-perf");
  if (!version.empty()) hmc_tools::add_version(app, "hmc-perf", version);
  // The modes; the server and the loopback child take only the options of `server_side`.
  int64_t listen = 0;
  uint64_t size = 0;
  std::string test, op, format, progress_thread, sizes;
  auto* loopback = app.add_flag("--loopback");
  auto* listen_opt = app.add_option("--listen", listen)->check(whole_in(1, 65535, "a port"));
  auto* connect = app.add_option("--connect", o->connect)
                      ->check(CLI::Validator(
                          [](std::string& v) -> std::string {
                            const auto colon = v.rfind(':');
                            int64_t port = 0;
                            if (colon == std::string::npos || colon == 0 ||
                                !hmc_tools::parse_whole(v.substr(colon + 1), 1, 65535, &port))
                              return "wants HOST:PORT, got '" + v + "'";
                            return "";
                          },
                          "HOST:PORT"));
  auto* peer = app.add_option("--peer-address", o->peer_address_hex)
                   ->check(CLI::Validator(
                       [](std::string& v) -> std::string {
                         if (v.empty() || v.size() % 2 != 0 ||
                             v.find_first_not_of("0123456789abcdef") != std::string::npos)
                           return "wants lowercase hex";
                         return "";
                       },
                       "HEX"))
                   ->group("");
  auto* parent_pid = app.add_option("--parent-pid", o->parent_pid)
                         ->check(whole_in(1, INT32_MAX, "a pid"))
                         ->group("");
  auto not_empty = [](const std::string& wants) {
    return CLI::Validator(
        [wants](std::string& v) -> std::string { return v.empty() ? "wants " + wants : ""; },
        "TEXT");
  };
  std::vector<CLI::Option*> server_side = {
      listen_opt,
      peer,
      parent_pid,
      app.get_help_ptr(),
      app.add_option("--bind", o->bind)->check(not_empty("an address")),
      app.add_flag("--forever", o->forever),
      app.add_option("--net", o->net)->check(not_empty("a net plugin name")),
      app.add_option("--path", o->path)
          ->check(CLI::Validator(
              [](std::string& v) -> std::string {
                return v.find('/') == std::string::npos
                           ? "wants PLUGIN/DEVICE, e.g. hoststage/tcp, got '" + v + "'"
                           : "";
              },
              "PLUGIN/DEVICE")),
      app.add_option("--progress-thread", progress_thread)->check(one_of({"0", "1"})),
      hmc_tools::add_timeout(app, &o->timeout_ms, 1, INT32_MAX, "the bound of every single wait"),
      app.add_flag("--quiet", o->quiet)};
  app.add_option("--test", test)->check(one_of({"bw", "lat"}));
  app.add_option("--op", op)->check(one_of({"send", "put", "get"}));
  auto* size_opt = app.add_option("--size", size)->transform(hmc_tools::size_at_least(1));
  auto* sizes_opt = app.add_option("--sizes", sizes);
  app.add_option("--iters", o->iters)->check(whole_in(1, INT32_MAX, "a count"));
  app.add_option("--warmup", o->warmup)->check(whole_in(0, INT32_MAX, "a count"));
  app.add_option("--window", o->window)->check(whole_in(1, kMaxWindow, "a window"));
  auto device_name = CLI::Validator(
      [](std::string& v) -> std::string {
        return v.empty() || v.size() >= 32 ? "wants a device name such as host or cuda:0" : "";
      },
      "DEV");
  app.add_option("--mem", o->mem)->check(device_name);
  app.add_option("--peer-mem", o->peer_mem)->check(device_name);
  app.add_flag("--check", o->check);
  app.add_option("--format", format)->check(one_of({"table", "json"}));
  app.add_option("--samples", o->samples)->check(not_empty("a file name"));
  hmc_tools::Parsed parsed = hmc_tools::parse_quietly(app, argc, argv, err);
  if (parsed != hmc_tools::Parsed::Run) return parsed;
  auto refuse = [err](std::string why) {
    *err = std::move(why);
    return hmc_tools::Parsed::Bad;
  };
  std::vector<std::string> modes;
  for (CLI::Option* m : {loopback, listen_opt, connect, peer})
    for (size_t i = 0; i < m->count(); ++i) modes.push_back(m->get_name());
  if (modes.empty()) return refuse("choose one of --loopback, --listen PORT, --connect HOST:PORT");
  if (modes.size() > 1)
    return refuse("give only one of --listen, --connect, --loopback (" + modes[1] +
                  " repeats the choice)");
  o->mode = loopback->count()     ? Mode::Loopback
            : listen_opt->count() ? Mode::Listen
            : connect->count()    ? Mode::Connect
                                  : Mode::Peer;
  o->listen_port = static_cast<uint16_t>(listen);
  if (!test.empty()) o->test = test == "bw" ? Test::Bw : Test::Lat;
  if (!op.empty()) o->op = op == "send" ? Op::Send : op == "put" ? Op::Put : Op::Get;
  if (!format.empty()) o->format = format == "json" ? Format::Json : Format::Table;
  if (!progress_thread.empty()) o->progress_thread = progress_thread == "1";
  if (size_opt->count() && sizes_opt->count()) return refuse("give --size or --sizes, not both");
  if (size_opt->count()) o->sizes = {size};
  if (sizes_opt->count() && !parse_size_range(sizes, &o->sizes, err)) return hmc_tools::Parsed::Bad;
  if (o->sizes.empty()) o->sizes = {8};
  // The server and the loopback child follow the client's test choice: refuse test options
  // there rather than silently ignore them; and the server's options on a client.
  const bool serving = o->mode == Mode::Listen || o->mode == Mode::Peer;
  for (const CLI::Option* g : app.get_options()) {
    if (g->count() == 0) continue;
    const bool for_server =
        std::find(server_side.begin(), server_side.end(), g) != server_side.end();
    if (serving && !for_server)
      return refuse("option " + g->get_name() +
                    " is for the client: the server follows the client's choice");
    if (!serving && (g->get_name() == "--bind" || g->get_name() == "--forever"))
      return refuse("option " + g->get_name() + " is for the server (--listen)");
  }
  if (o->mode != Mode::Peer && o->parent_pid != 0)
    return refuse("--parent-pid is internal to --loopback");
  if (!o->samples.empty() && o->test != Test::Lat)
    return refuse("--samples applies to --test lat (bw measures no single message)");
  if (o->test == Test::Lat && o->window > 1)
    return refuse("--window applies to --test bw (a ping-pong has one message in flight)");
  return hmc_tools::Parsed::Run;
}

}  // namespace hmc::perf

// hmc-perf: bandwidth and latency of hmc transfers between two processes, shaped like
// ucx_perftest. This file: argument handling, the environment, and the three ways of getting a
// peer (--listen, --connect, --loopback with a child process). client.cpp and server.cpp run the
// measurement.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "session.h"

namespace hmc::perf {
namespace {

// The environment must be set before the context reads it (and the loopback child inherits it).
void apply_environment(const Options& o) {
  if (!o.net.empty()) setenv("HMC_NET_PLUGINS", o.net.c_str(), 1);
  if (!o.path.empty()) setenv("HMC_PATH", o.path.c_str(), 1);
}

hmc::ContextOptions context_options(const Options& o) {
  hmc::ContextOptions c;
  c.progress_thread = o.progress_thread;
  if (o.mode == Mode::Listen) {
    c.listen_host = o.bind;
    c.listen_port = o.listen_port;
  }
  return c;
}

// Accepts the next peer within timeout_ms (< 0: without end, for the --listen server). Connectors
// that fail their setup (a port scanner, a client of another version, a wrong token) never come
// out of hmc_accept: the library logs them and goes on.
hmc::Peer accept_peer(hmc::Context& ctx, int timeout_ms, hmc::tools::ChildProcess* child) {
  for (;;) {
    hmc_peer_t p = nullptr;
    hmc_status_t s = hmc_accept(ctx.get(), timeout_ms < 0 ? 3600 * 1000 : timeout_ms, &p);
    if (s == HMC_SUCCESS) return hmc::Peer(p);
    hmc::Error e(s, "hmc_accept");
    if (child != nullptr && child->exited())
      throw RunError("the peer process " + child->describe_exit() + " before connecting");
    if (s != HMC_ERR_TIMEOUT || timeout_ms >= 0) throw e;
  }
}

int run_loopback(const Options& o) {
  hmc::Context ctx(context_options(o));
  auto addr = ctx.address();
  std::vector<std::string> args = {hmc::tools::self_exe(),
                                   "--peer-address",
                                   to_hex(addr),
                                   "--parent-pid",
                                   std::to_string(getpid()),
                                   "--timeout",
                                   std::to_string(o.timeout_ms),
                                   "--progress-thread",
                                   std::to_string(o.progress_thread)};
  if (o.quiet) args.push_back("--quiet");
  // Destroyed (killed and reaped if still running) on every way out of this function.
  auto child = hmc::tools::ChildProcess::spawn(args);
  int rc = 0;
  hmc::Peer peer;
  try {
    peer = accept_peer(ctx, o.timeout_ms, &child);
    rc = run_client(o, ctx, peer);
  } catch (...) {
    // Stop the child before the peer closes, so that only our error is printed, not the child's
    // "peer lost" that our exit would cause.
    child.kill_and_reap();
    throw;
  }
  peer.close();
  if (!child.wait_for(o.timeout_ms))
    throw RunError("the peer process did not exit within " + std::to_string(o.timeout_ms) + " ms");
  if (child.exit_code() != 0) throw RunError("the peer process " + child.describe_exit());
  return rc;
}

int run_peer(const Options& o) {
  if (!hmc::tools::die_with_parent(o.parent_pid)) return 1;
  std::vector<uint8_t> addr;
  if (!from_hex(o.peer_address_hex, &addr)) throw RunError("bad --peer-address");
  hmc::Context ctx(context_options(o));
  hmc::Peer peer = ctx.connect(addr, o.timeout_ms);
  return run_server(o, ctx, peer);
}

int run_connect(const Options& o) {
  hmc::Context ctx(context_options(o));
  auto addr = hmc::Context::address_from_host(o.connect);
  hmc::Peer peer = ctx.connect(addr, o.timeout_ms);
  return run_client(o, ctx, peer);
}

int run_listen(const Options& o) {
  hmc::Context ctx(context_options(o));
  std::fprintf(stderr, "hmc-perf: listening on %s:%u\n", o.bind.c_str(), o.listen_port);
  for (;;) {
    hmc::Peer peer = accept_peer(ctx, -1, nullptr);
    auto info = peer.info();
    if (!o.quiet)
      std::fprintf(stderr, "hmc-perf: serving %s pid %d (%s) over %s\n", info.remote_host,
                   info.remote_pid, info.remote_address, info.path);
    int rc = 1;
    try {
      rc = run_server(o, ctx, peer);
    } catch (const std::exception& e) {
      if (!o.forever) throw;
      // One bad client costs its own session, not the server.
      std::fprintf(stderr, "hmc-perf: error with the client %s pid %d (%s): %s\n", info.remote_host,
                   info.remote_pid, info.remote_address, e.what());
    }
    if (!o.forever) return rc;
  }
}

}  // namespace
}  // namespace hmc::perf

int main(int argc, char** argv) {
  using namespace hmc::perf;
  Options o;
  std::string text;
  const auto parsed = parse_args(argc, argv, &o, &text, hmc_version());
  if (int rc = hmc_tools::report("hmc-perf", parsed, text, usage_text()); rc >= 0) return rc;
  // A peer that vanishes must show up as an hmc error, not kill us.
  signal(SIGPIPE, SIG_IGN);
  apply_environment(o);
  try {
    switch (o.mode) {
      case Mode::Loopback: return run_loopback(o);
      case Mode::Peer: return run_peer(o);
      case Mode::Connect: return run_connect(o);
      case Mode::Listen: return run_listen(o);
      case Mode::None: break;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hmc-perf%s: error: %s\n", o.mode == Mode::Peer ? " (peer)" : "",
                 e.what());
    return 1;
  }
  return 2;
}

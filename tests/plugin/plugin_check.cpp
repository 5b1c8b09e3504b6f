// hmc_plugin_check: loads plugins the way the core does (HMC_PLUGIN_PATH, HMC_DEVICE_PLUGINS,
// HMC_NET_PLUGINS) and checks that the ones named on the command line loaded.
//
//   hmc_plugin_check [--no-default-dirs] [--exercise-net NAME] KIND:NAME...
//
// Prints one line per plugin file found. With --exercise-net, also sends tagged messages over a
// connection of that net plugin's device 0 to itself (listen, connect, accept, isend/irecv, test,
// a truncated receive) with a bounded wait. Exit status 0 when everything checked out, 1 when not,
// 2 on a usage error. Used by tests/plugin/out_of_tree.sh on the plugins built from sdk/templates.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/loader.h"
#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

namespace {

using hmc::plugin::Kind;
using hmc::plugin::Loader;
using hmc::plugin::Record;
using Clock = std::chrono::steady_clock;

constexpr auto kWaitLimit = std::chrono::seconds(10);

bool ok(int st, const char* what) {
  if (st == HMC_PLUGIN_SUCCESS) return true;
  fprintf(stderr, "FAIL %s: %s\n", what,
          hmc::plugin_status_string(static_cast<hmc_plugin_status_t>(st)));
  return false;
}

// Polls fn() until it answers something other than IN_PROGRESS, for at most kWaitLimit.
template <typename Fn>
int poll_until_done(Fn fn) {
  auto deadline = Clock::now() + kWaitLimit;
  int st;
  while ((st = fn()) == HMC_PLUGIN_IN_PROGRESS) {
    if (Clock::now() > deadline) return HMC_PLUGIN_ERR_INTERNAL;
  }
  return st;
}

// Tests req until it ends; returns its status and the bytes it moved.
int wait_request(const hmc_net_plugin_v2_t* t, hmc_net_request_t* req, size_t* bytes) {
  return poll_until_done([&] {
    int done = 0;
    int st = t->test(req, &done, bytes);
    return done ? st : (st == HMC_PLUGIN_SUCCESS ? HMC_PLUGIN_IN_PROGRESS : st);
  });
}

bool exercise_net(const Record& rec) {
  const hmc_net_plugin_v2_t* t = rec.net;
  if (!t->isend || !t->irecv) {
    fprintf(stderr, "FAIL net/%s offers no isend/irecv\n", rec.name.c_str());
    return false;
  }
  unsigned char handle[HMC_NET_HANDLE_MAX];
  size_t handle_len = 0;
  hmc_net_listener_t* listener = nullptr;
  if (!ok(t->listen(rec.net_ctx, 0, handle, &handle_len, &listener), "listen")) return false;
  if (handle_len == 0 || handle_len > HMC_NET_HANDLE_MAX) {
    fprintf(stderr, "FAIL listen gave a handle of %zu bytes\n", handle_len);
    return false;
  }
  hmc_net_ep_t* client = nullptr;
  hmc_net_ep_t* server = nullptr;
  bool good = ok(t->connect(rec.net_ctx, 0, handle, handle_len, &client), "connect") &&
              ok(poll_until_done([&] { return t->accept(listener, &server); }), "accept") &&
              ok(poll_until_done([&] { return t->ep_ready(client); }), "ep_ready(client)") &&
              ok(poll_until_done([&] { return t->ep_ready(server); }), "ep_ready(server)");

  const char message[] = "hello through the plugin";
  if (good) {
    // A receive posted before the send, and one after (the message waits for it).
    char buf1[64] = {}, buf2[64] = {};
    hmc_net_request_t *r1 = nullptr, *r2 = nullptr, *s1 = nullptr, *s2 = nullptr;
    size_t n1 = 0, n2 = 0, sn = 0;
    good = ok(t->irecv(server, buf1, sizeof buf1, nullptr, 7, &r1), "irecv") &&
           ok(t->isend(client, message, sizeof message, nullptr, 7, &s1), "isend") &&
           ok(t->isend(client, message, sizeof message, nullptr, 8, &s2), "isend") &&
           ok(t->irecv(server, buf2, sizeof buf2, nullptr, 8, &r2), "irecv") &&
           ok(wait_request(t, s1, &sn), "send 1") && ok(wait_request(t, s2, &sn), "send 2") &&
           ok(wait_request(t, r1, &n1), "receive 1") && ok(wait_request(t, r2, &n2), "receive 2");
    if (good && (n1 != sizeof message || n2 != sizeof message || memcmp(buf1, message, n1) != 0 ||
                 memcmp(buf2, message, n2) != 0)) {
      fprintf(stderr, "FAIL the received bytes differ from the sent ones\n");
      good = false;
    }
  }
  if (good) {
    // A message longer than the receive buffer ends the receive with TRUNCATED.
    char small[4];
    hmc_net_request_t *r = nullptr, *s = nullptr;
    size_t n = 0;
    good = ok(t->irecv(server, small, sizeof small, nullptr, 9, &r), "irecv") &&
           ok(t->isend(client, message, sizeof message, nullptr, 9, &s), "isend") &&
           ok(wait_request(t, s, &n), "send 3");
    if (good) {
      int st = wait_request(t, r, &n);
      if (st != HMC_PLUGIN_ERR_TRUNCATED) {
        fprintf(stderr, "FAIL truncated receive ended with %s\n",
                hmc::plugin_status_string(static_cast<hmc_plugin_status_t>(st)));
        good = false;
      }
    }
  }
  if (client) t->close_ep(client);
  if (server) t->close_ep(server);
  t->close_listener(listener);
  if (good) printf("net/%s: loopback messages ok\n", rec.name.c_str());
  return good;
}

int usage() {
  fprintf(stderr,
          "usage: hmc_plugin_check [--no-default-dirs] [--exercise-net NAME] KIND:NAME...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  hmc::plugin::LoaderOptions opts;
  std::vector<std::pair<Kind, std::string>> expected;
  std::string exercise;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-default-dirs") {
      opts.search_default_dirs = false;
    } else if (a == "--exercise-net" && i + 1 < argc) {
      exercise = argv[++i];
    } else if (a.rfind("net:", 0) == 0) {
      expected.emplace_back(Kind::Net, a.substr(4));
    } else if (a.rfind("device:", 0) == 0) {
      expected.emplace_back(Kind::Device, a.substr(7));
    } else {
      return usage();
    }
  }

  hmc::Config cfg;
  if (cfg.load_from_environment() != HMC_SUCCESS) {
    fprintf(stderr, "FAIL %s\n", hmc::last_error().c_str());
    return 1;
  }
  int level = HMC_LOG_WARN;
  hmc::log::parse_level(cfg.get("HMC_LOG_LEVEL"), &level);
  std::string err;
  hmc::log::configure(level, "stderr", &err);

  Loader loader(opts);
  loader.load(cfg);
  for (const auto& r : loader.records())
    printf("%-7s %-12s %-12s %s%s%s\n", hmc::plugin::kind_name(r->kind), r->name.c_str(),
           hmc::plugin::state_name(r->state), r->path.c_str(), r->reason.empty() ? "" : ": ",
           r->reason.c_str());

  bool good = true;
  for (const auto& [kind, name] : expected) {
    const Record* r = loader.find(kind, name);
    if (!r || !r->loaded) {
      fprintf(stderr, "FAIL %s plugin '%s' did not load%s%s\n", hmc::plugin::kind_name(kind),
              name.c_str(), r ? ": " : " (not found)", r ? r->reason.c_str() : "");
      good = false;
    }
  }
  if (!exercise.empty()) {
    const Record* r = loader.find(Kind::Net, exercise);
    if (!r || !r->loaded) {
      fprintf(stderr, "FAIL net plugin '%s' to exercise is not loaded\n", exercise.c_str());
      good = false;
    } else {
      good = exercise_net(*r) && good;
    }
  }
  loader.finalize_all();
  printf("%s\n", good ? "PASS" : "FAIL");
  return good ? 0 : 1;
}

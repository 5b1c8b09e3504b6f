// gtest side of the integration tests: the list of data paths every scenario runs over, and a
// fixture that owns the test's context and its hmc-test-peer children.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <string>
#include <vector>

#include "harness.h"
#include "scenarios.h"

#ifndef HMC_TEST_PEER_EXE
#error "HMC_TEST_PEER_EXE (path of hmc-test-peer) must be defined by the build"
#endif

// Statuses print by name in assertion messages.
inline void PrintTo(hmc_status_t st, std::ostream* os) {
  *os << hmc_status_string(st) << " (" << static_cast<int>(st) << ")";
}

// Asserts that an hmc call succeeded, showing the status and message otherwise.
#define ASSERT_HMC_OK(expr)                                                  \
  do {                                                                       \
    hmc_status_t st_ = (expr);                                               \
    ASSERT_EQ(st_, HMC_SUCCESS) << #expr << ": " << hmc_test::describe(st_); \
  } while (0)

namespace hmc_test {

// One data path: its label (the test name's suffix), the value of HMC_PATH, the net plugin
// that provides it, and the environment both processes get for it.
struct DataPath {
  std::string name;    // label, "plugin/flavour": unique per entry
  std::string path;    // HMC_PATH value, "plugin/device" (what hmc_peer_info must report)
  std::string plugin;  // net plugin short name: the file is libhmc-net-<plugin>.so
  EnvOverrides env;
  // The target of a one-sided operation checks every access itself against its own record of
  // the region. Deregistered regions and forged descriptors are refused on every path anyway
  // (the owner vouches for each import and withdraws a region from its importers before
  // deregistering it: regions/regions.cpp); what only such a target refuses is access through
  // a descriptor the owner was never asked about (the layout of owners from before withdrawal,
  // forged). Paths that check only at the initiator (net-ucx and net-ofi over tcp and shared
  // memory: see their READMEs) skip that case, saying so.
  bool target_checks_rma = true;
  // A reference path: scenarios that test the core, not the data path (the token challenge
  // on the control plane), run over the reference paths only.
  bool reference = false;
};

// Every data-path scenario runs once per entry (HMC_INSTANTIATE_OVER_PATHS); scenarios of the
// core alone run over the reference entries (HMC_INSTANTIATE_OVER_REFERENCE_PATHS). A new net
// plugin is one more entry. An entry whose plugin was not built (not in HMC_TEST_PLUGIN_DIR)
// is skipped, naming the CMake option. Each entry loads only its own plugin (HMC_NET_PLUGINS):
// a path's tests test that path.
inline const std::vector<DataPath>& data_paths() {
  static const std::vector<DataPath> paths{
      // {name, HMC_PATH, plugin, environment, target_checks_rma, reference}
      {"hoststage/tcp", "hoststage/tcp", "hoststage", {{"HMC_HOSTSTAGE_SHM", "0"}}, true, true},
      {"hoststage/shm",
       "hoststage/shm",
       "hoststage",
       {{"HMC_HOSTSTAGE_SHM", std::nullopt}},
       true,
       true},
      // net-ucx has one device, "ucx"; the transports are UCX's choice, restricted here.
      // Checks one-sided access at the initiator only (plugins/net-ucx/README.md): an
      // unvouched descriptor is not refused (target_checks_rma false).
      {"ucx/tcp", "ucx/ucx", "ucx", {{"HMC_UCX_TLS", "tcp"}, {"HMC_UCX_NET_DEVICES", "lo"}}, false},
      {"ucx/shm", "ucx/ucx", "ucx", {{"HMC_UCX_TLS", "posix,cma,self"}}, false},
      // net-ofi has one device per libfabric provider. Checks one-sided access at the
      // initiator; the target's provider does not refuse (shm) or drops the connection (tcp)
      // (plugins/net-ofi/README.md): an unvouched descriptor is not refused.
      {"ofi/tcp", "ofi/tcp", "ofi", {{"HMC_OFI_PROVIDER", "tcp"}}, false},
      {"ofi/shm", "ofi/shm", "ofi", {{"HMC_OFI_PROVIDER", "shm"}}, false},
  };
  return paths;
}

// The entries with `reference` set.
inline std::vector<DataPath> reference_paths() {
  std::vector<DataPath> v;
  for (const DataPath& p : data_paths())
    if (p.reference) v.push_back(p);
  return v;
}

// The plugin file of a data path in the build tree.
inline std::string data_path_plugin_file(const DataPath& p) {
  return std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-" + p.plugin + ".so";
}

// "" when the path's plugin was built, else why the path's tests are skipped.
inline std::string data_path_unavailable(const DataPath& p) {
  std::string file = data_path_plugin_file(p);
  if (access(file.c_str(), F_OK) == 0) return "";
  std::string option = p.plugin;
  for (char& c : option) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return "net plugin " + p.plugin + " was not built (no " + file +
         "); configure with -DHMC_BUILD_PLUGIN_" + option + "=ON to test path " + p.name;
}

// The environment of a data path: forced path, only its plugin, the entry's extra variables.
inline EnvOverrides data_path_environment(const DataPath& p) {
  EnvOverrides env{{"HMC_PATH", p.path}, {"HMC_NET_PLUGINS", p.plugin}};
  env.insert(env.end(), p.env.begin(), p.env.end());
  return env;
}

inline std::string data_path_test_name(const testing::TestParamInfo<DataPath>& info) {
  std::string n = info.param.name;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

inline void PrintTo(const DataPath& p, std::ostream* os) {
  *os << p.name << " (HMC_PATH=" << p.path << ")";
}

// The environment every test process and peer starts from: plugins from the build tree, no
// ambient token or timeout override from the developer's shell.
inline EnvOverrides base_environment() {
  return {{"HMC_PLUGIN_PATH", std::string(HMC_TEST_PLUGIN_DIR)},
          {"HMC_NET_PLUGINS", std::nullopt},
          {"HMC_PATH", std::nullopt},
          {"HMC_AUTH_TOKEN", std::nullopt},
          {"HMC_TIMEOUT_MS", std::nullopt},
          {"HMC_PROGRESS_THREAD", std::nullopt},
          {"HMC_WAIT_SPIN_US", std::nullopt}};
}

// What hmc_context_create returns with var=value over the base environment, and in *msg
// hmc_last_error() after it (a context it did make is destroyed again).
inline hmc_status_t create_context_with(const char* var, const char* value, std::string* msg) {
  ScopedEnv env(base_environment());
  env.apply({{var, value}});
  hmc_context_t ctx = nullptr;
  hmc_status_t st = hmc_context_create(nullptr, &ctx);
  *msg = hmc_last_error();
  if (st == HMC_SUCCESS) hmc_context_destroy(ctx);
  return st;
}

// A spawned hmc-test-peer and the peer handle the test accepted from it. When the test has
// failed, its end shows what the peer said (the peer usually knows why).
struct Child : NoCopy {
  PeerProcess proc;
  hmc_peer_t peer = nullptr;
  bool reported = false;

  ~Child() {
    if (reported || proc.pid() <= 0 || !testing::Test::HasFailure()) return;
    ExitInfo e = proc.wait(2000);
    std::cerr << "[ PEER     ] hmc-test-peer (pid " << proc.pid() << ") " << e.describe() << "\n";
  }
};

// A test with one context in this process, made over the base environment.
class ContextTest : public testing::Test {
 protected:
  void SetUp() override {
    env_.apply(base_environment());
    hmc_status_t st = ctx_.create();
    ASSERT_EQ(st, HMC_SUCCESS) << "hmc_context_create: " << describe(st);
  }
  hmc_context_t ctx() const { return ctx_.get(); }

  // A second context in this process connected to the first: *ours is the accepted peer in
  // ctx(), *theirs the connected one in `other`.
  void connect_pair(Context* other, hmc_peer_t* ours, hmc_peer_t* theirs) {
    std::string err = connect_in_process(ctx(), other, kConnectTimeoutMs, ours, theirs);
    ASSERT_EQ(err, "");
  }

 private:
  ScopedEnv env_;
  Context ctx_;
};

class LoopbackTest : public testing::TestWithParam<DataPath> {
 protected:
  // A path whose plugin was not built skips every test (GTEST_SKIP here ends the test).
  void SetUp() override {
    std::string why = data_path_unavailable(GetParam());
    if (!why.empty()) GTEST_SKIP() << why;
  }

  // Sets the environment (data path, plugins, extra) and creates the test's context.
  void open(const EnvOverrides& extra = {}) {
    env_.apply(base_environment());
    env_.apply(data_path_environment(GetParam()));
    env_.apply(extra);
    hmc_status_t st = ctx_.create();
    ASSERT_EQ(st, HMC_SUCCESS) << "hmc_context_create: " << describe(st);
  }
  hmc_context_t ctx() const { return ctx_.get(); }

  // Spawns `hmc-test-peer scenario <our address> args...` with `env` on top of ours.
  void spawn(Child* c, const std::string& scenario, const std::vector<std::string>& args = {},
             const EnvOverrides& env = {}) {
    uint8_t addr[HMC_ADDRESS_MAX];
    size_t len = sizeof addr;
    hmc_status_t st = hmc_address(ctx(), addr, &len);
    ASSERT_EQ(st, HMC_SUCCESS) << "hmc_address: " << describe(st);
    std::vector<std::string> argv{scenario, hex_encode(addr, len),
                                  "parent-pid=" + std::to_string(getpid())};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string err = c->proc.spawn(HMC_TEST_PEER_EXE, argv, env);
    ASSERT_EQ(err, "");
  }

  // Accepts the connection of child c (spawned last), failing with the child's output if it
  // exits first. Notes (without failing) when the forced path was not the one chosen.
  void accept(Child* c) {
    auto t0 = Clock::now();
    hmc_status_t st = HMC_ERR_TIMEOUT;
    while (ms_since(t0) < kConnectTimeoutMs) {
      st = hmc_accept(ctx(), 200, &c->peer);
      if (st == HMC_SUCCESS) break;
      if (st != HMC_ERR_TIMEOUT) {
        std::string why = describe(st);
        c->reported = true;
        FAIL() << "hmc_accept: " << why << "\nthe peer " << c->proc.wait(5000).describe();
      }
      if (!c->proc.running()) {
        st = hmc_accept(ctx(), 1000, &c->peer);  // it may have connected, then ended
        ASSERT_EQ(st, HMC_SUCCESS) << "the peer ended before it was accepted (" << describe(st)
                                   << "); the peer " << c->proc.wait(0).describe();
        break;
      }
    }
    ASSERT_EQ(st, HMC_SUCCESS) << "hmc_accept: nothing connected in " << kConnectTimeoutMs
                               << " ms; the peer " << c->proc.wait(0).describe();
    hmc_peer_info_t info{};
    info.struct_size = sizeof info;
    st = hmc_peer_info(c->peer, &info);
    ASSERT_EQ(st, HMC_SUCCESS) << "hmc_peer_info: " << describe(st);
    if (GetParam().path != info.path) {
      std::cerr << "[ NOTE     ] HMC_PATH=" << GetParam().path << " not honoured: the peer got '"
                << info.path << "' (" << info.path_reason << ")\n";
      RecordProperty("path_not_honoured", info.path);
    }
  }

  void start(Child* c, const std::string& scenario, const std::vector<std::string>& args = {},
             const EnvOverrides& env = {}) {
    ASSERT_NO_FATAL_FAILURE(spawn(c, scenario, args, env));
    ASSERT_NO_FATAL_FAILURE(accept(c));
  }

  // Says the last word to a connected child (see kTagBye); it must then exit 0 (within the
  // bound); its output is shown otherwise.
  void expect_exit_ok(Child* c) {
    if (c->peer) {
      std::string err;
      EXPECT_EQ(send_u64(c->peer, kTagBye, kCtrlBye, kOpTimeoutMs, &err), HMC_SUCCESS)
          << "the final message to the peer: " << err;
    }
    ExitInfo e = c->proc.wait(kPeerExitTimeoutMs);
    c->reported = true;
    EXPECT_TRUE(e.ok()) << "hmc-test-peer " << e.describe();
  }

  // Control values with the peer, failing the test with the status on error.
  void send_ctrl(hmc_peer_t peer, uint64_t tag, uint64_t v) {
    std::string err;
    ASSERT_EQ(send_u64(peer, tag, v, kOpTimeoutMs, &err), HMC_SUCCESS)
        << "control send on tag " << tag << ": " << err;
  }
  void recv_ctrl(hmc_peer_t peer, uint64_t tag, uint64_t* v) {
    std::string err;
    ASSERT_EQ(recv_u64(peer, tag, v, kOpTimeoutMs, &err), HMC_SUCCESS)
        << "control receive on tag " << tag << ": " << err;
  }

  // The parent side of scenario::kEchoSizes: for each size, post the receive of the reply,
  // send pattern data, and check the reply byte for byte. use_hmc_alloc: buffers from
  // hmc_mem_alloc(ctx, "host") instead of malloc.
  void echo_sizes(Child* c, const std::vector<size_t>& sizes, bool use_hmc_alloc) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE("message " + std::to_string(i) + " of " + std::to_string(sizes[i]) + " bytes");
      HostBuffer out, in;
      if (use_hmc_alloc) {
        hmc_status_t st = out.alloc_hmc(ctx(), sizes[i]);
        ASSERT_EQ(st, HMC_SUCCESS) << "hmc_mem_alloc(host, " << sizes[i] << "): " << describe(st);
        st = in.alloc_hmc(ctx(), sizes[i]);
        ASSERT_EQ(st, HMC_SUCCESS) << "hmc_mem_alloc(host, " << sizes[i] << "): " << describe(st);
      } else {
        out = HostBuffer(sizes[i]);
        in = HostBuffer(sizes[i]);
      }
      ASSERT_TRUE(out && in) << "out of memory";
      if (sizes[i] >= kPrefaultFrom) {
        out.prefault();
        in.prefault();
      }
      pattern_fill(out.data(), sizes[i], kSeedParent + i);
      auto t0 = Clock::now();
      Requests rq;
      size_t r = rq.post([&](hmc_request_t* posted) {
        return hmc_recv(c->peer, in.data(), sizes[i], kTagReply + i, posted);
      });
      size_t s = rq.post([&](hmc_request_t* posted) {
        return hmc_send(c->peer, out.data(), sizes[i], kTagData + i, posted);
      });
      const auto& sent = rq.wait(s, kOpTimeoutMs);
      EXPECT_EQ(sent.status, HMC_SUCCESS) << "send: " << sent.error;
      EXPECT_EQ(sent.bytes, sizes[i]) << "bytes reported by the send";
      const auto& got = rq.wait(r, kOpTimeoutMs);
      ASSERT_EQ(got.status, HMC_SUCCESS) << "receive of the reply: " << got.error;
      int64_t ms = ms_since(t0);
      ASSERT_EQ(got.bytes, sizes[i]) << "bytes reported by the receive";
      ASSERT_EQ(pattern_check(in.data(), sizes[i], kSeedChild + i), "") << "the reply";
      if (sizes[i] >= 64 * kMiB)
        std::cerr << "[ INFO     ] " << GetParam().name << ": " << sizes[i]
                  << " bytes there and back in " << ms << " ms ("
                  << (ms ? 2.0 * sizes[i] / 1e6 / (ms / 1e3) : 0.0)
                  << " MB/s incl. the peer's check)\n";
    }
  }

 private:
  // Declared before ctx_: the context is destroyed before the environment is restored.
  ScopedEnv env_;
  Context ctx_;
};

#define HMC_INSTANTIATE_OVER_PATHS(Suite)                                           \
  INSTANTIATE_TEST_SUITE_P(Paths, Suite, testing::ValuesIn(hmc_test::data_paths()), \
                           hmc_test::data_path_test_name)
#define HMC_INSTANTIATE_OVER_REFERENCE_PATHS(Suite)                                      \
  INSTANTIATE_TEST_SUITE_P(Paths, Suite, testing::ValuesIn(hmc_test::reference_paths()), \
                           hmc_test::data_path_test_name)

}  // namespace hmc_test

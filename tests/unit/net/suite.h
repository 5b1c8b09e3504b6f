// The net plugin test suite: one gtest suite parameterised over net plugin configurations
// (configs.cpp), in the manner of UCX's test/gtest/uct/uct_test.h. contract_test.cpp holds the
// scenarios every net plugin must pass (the contract of hmc/plugin/net.h); <plugin>_test.cpp
// hold what is particular to one plugin. Adding a plugin is adding its entries to net_configs().
//
// A connection runs its two sides in two processes (fork; the child reports through its exit
// code), or two contexts of one process where that is enough (LocalPair, run in a child
// process). The test process itself initialises a plugin only after its children are forked:
// some (libfabric) start threads that a later fork would not carry.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "driver.h"
#include "memory.h"
#include "pattern.h"

namespace net_test {

// Where a configuration's plugin departs from what the scenarios otherwise expect: by design (its
// README says why) or by a known defect (marked so). A scenario then checks the alternative
// behaviour, or leaves that part out, or skips, saying which gap.
enum Gap : uint32_t {
  kNoGap = 0,
  // A peer's close_ep is not seen: its pending requests stay pending (only a dead peer is).
  kPeerCloseUnseen = 1u << 0,
  // The key of a deregistered region still reaches the memory (accesses are checked from what
  // the key carries; the owner does not take part).
  kStaleKeysAccepted = 1u << 1,
  // While work is in flight, wait_fd is a short timer rather than a wake-up, so an armed context
  // with a receive pending does not stay quiet.
  kTimerWaitFd = 1u << 2,
  // A truncated receive's buffer holds no defined bytes (net.h asks only for the status and the
  // sent length).
  kTruncatedDataUnset = 1u << 3,
  // Eager sends complete only once the receiving process progresses.
  kSendsWaitForPeer = 1u << 4,
  // Registering zero bytes is refused with INVALID_ARGUMENT.
  kNoEmptyRegions = 1u << 5,
  // ep_ready keeps answering SUCCESS after the peer was lost.
  kReadyAfterLoss = 1u << 6,
  // Known defect (net.h asks otherwise): messages that arrived before the peer was lost are
  // dropped with it; every receive posted afterwards fails with PEER_LOST.
  kArrivedDroppedOnLoss = 1u << 7,
  // Known defect (net.h asks otherwise): a receive reading a rendezvous message from a peer that
  // dies in the middle never ends.
  kStuckReadOnDeath = 1u << 8,
  // A connect to a closed listener is not refused: nobody answers, and it fails only at the
  // host's timeout.
  kConnectTimesOut = 1u << 9,
};

// One line on gap g, for skip messages.
const char* gap_text(Gap g);

// One plugin configuration: the plugin, the device, its settings, and what the scenarios need
// to know about it.
struct NetConfig {
  std::string name;    // test name suffix: "hoststage_tcp"
  std::string plugin;  // loaded from HMC_TEST_PLUGIN_DIR/libhmc-net-<plugin>.so
  int dev = 0;         // device the connections use
  Cfg cfg;             // host configuration (HMC_* settings)
  size_t eager = 0;    // largest message sent eagerly (0: the plugin decides, unknown here)
  size_t largest = (4u << 20) + 3;  // largest message of SendRecvSizesBothDirections
  size_t huge = 0;  // size of the NetHuge message (0: not run for this configuration)
  // Another configuration's device with other data-path settings (streams, chunk sizes): the
  // message scenarios run over it, those of connection handling and properties do not.
  bool variant = false;
  // System calls the kernel refuses with EPERM in both processes of every scenario (a seccomp
  // filter installed before init, the listener's side then running in a child process too): a
  // host whose policy forbids them, as Yama's ptrace_scope or a container profile forbids
  // cross-memory attach. Empty: none.
  std::vector<long> refused_syscalls;
  uint32_t gaps = kNoGap;
  std::string gaps_doc;  // where the gaps are explained
  // What the plugin logs ("": not checked) when it notices a lost peer, and when a connect
  // timed out with nobody answering.
  struct {
    std::string peer_lost;
    std::string no_answer;
  } logs;

  bool lacks(Gap g) const { return (gaps & g) != 0; }
};

void PrintTo(const NetConfig& c, std::ostream* os);
std::string config_name(const ::testing::TestParamInfo<NetConfig>& info);

// Every configuration (configs.cpp), those of one plugin (with or without the variants), all
// but the variants, the first of each plugin, those with a huge message size.
const std::vector<NetConfig>& net_configs();
std::vector<NetConfig> net_configs_of(const std::string& plugin, bool variants = true);
std::vector<NetConfig> net_base_configs();
std::vector<NetConfig> net_plugin_firsts();
std::vector<NetConfig> net_configs_with_huge();
// Test name suffix: the configuration's name, or for net_plugin_firsts() its plugin's.
std::string plugin_name(const ::testing::TestParamInfo<NetConfig>& info);

// The table of plugin `name`; skips the test when it was not built, fails it when it does not
// load. Use through NET_REQUIRE_PLUGIN.
void require_plugin(const std::string& name, const hmc_net_plugin_v2_t** out);
#define NET_REQUIRE_PLUGIN(name, out)                                               \
  do {                                                                              \
    ::net_test::require_plugin(name, out);                                          \
    if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return; \
  } while (0)

// Makes the kernel answer EPERM to the system calls nrs in this thread and the processes and
// threads it starts from now on (irreversibly: call it in a child process). False, with the
// reason in why, where the kernel does not let a process install the filter.
bool refuse_syscalls(const std::vector<long>& nrs, std::string* why);

// Runs body in a child process and expects it to exit cleanly; gtest failures in the child are
// printed there and make it fail. skip_child() in the body skips the test.
void in_child(const std::function<void()>& body);
[[noreturn]] void skip_child(const std::string& why);

// A test over one configuration.
class NetTest : public ::testing::TestWithParam<NetConfig> {
 protected:
  void SetUp() override;

  const NetConfig& config() const { return GetParam(); }
  const hmc_net_plugin_v2_t* t() const { return t_; }
  int dev() const { return GetParam().dev; }
  const Cfg& cfg() const { return GetParam().cfg; }
  // Skips the test when the configuration has gap g.
  void require_no(Gap g);

  // Runs parent (listener) and child (connector) in two processes. killed_by: the signal the
  // child is meant to die of (0: it must exit cleanly). A plugin that has no device here (init
  // answers NO_DEVICE) skips the test.
  void run(const std::function<void(Side&)>& parent, const std::function<void(Side&)>& child,
           double timeout_s = 60, int killed_by = 0, uint32_t host_timeout_ms = 5000);

 private:
  const hmc_net_plugin_v2_t* t_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Two contexts of one process, driven alternately by one thread. Use inside in_child().

struct LocalPair {
  LocalPair(const hmc_net_plugin_v2_t* t, const Cfg& cfg, int dev, uint32_t timeout_ms = 5000)
      : t(t), ha(cfg, timeout_ms), hb(cfg, timeout_ms), dev(dev) {}
  ~LocalPair();
  LocalPair(const LocalPair&) = delete;
  LocalPair& operator=(const LocalPair&) = delete;

  // Both contexts; skip_child() when the plugin has no device here.
  void init();
  // init, listen on a, connect from b, both endpoints ready.
  void connect();
  // Accepts on l and waits for eb, progressing both contexts (some transports answer only
  // once the other side progresses).
  void finish_connect();
  // init, then listen on a (l, handle).
  void listen();
  // A connect from b with byte `at` of the handle (its protocol version) set to 99 is refused
  // with INVALID_ARGUMENT, and b's log says why.
  void expect_version_refused(size_t at);
  // Connects b to a's listener l (its handle), then finish_connect.
  void connect_to_listener();
  // init, listen on a, and connect from b with byte `at` of the handle flipped (a wrong nonce):
  // b's endpoint in *ep.
  void connect_forged(size_t at, hmc_net_ep_t** ep);
  // Progresses the forged endpoint ep until it leaves IN_PROGRESS (at most timeout_s), checking
  // that l accepts nothing meanwhile: its status then.
  hmc_plugin_status_t await_refusal(hmc_net_ep_t* ep, double timeout_s);
  // Sends `size` bytes of pattern seed from endpoint `from` to `to` on tag (the receive posted
  // first) and checks that both end well and the bytes arrive whole.
  void expect_delivery(hmc_net_ep_t* from, hmc_net_ep_t* to, size_t size, uint64_t tag,
                       uint64_t seed);
  // Connects b to the listener l, checks that a message crosses, and that l, having handed out
  // its endpoint, accepts no more.
  void expect_one_working_connection();
  // A send posted on ep (whose peer is gone) fails with PEER_LOST.
  void expect_send_lost(hmc_net_ep_t* ep);
  // One more connection between the same two contexts: {a's endpoint, b's endpoint}, released
  // by the destructor unless forget()-ten.
  std::pair<hmc_net_ep_t*, hmc_net_ep_t*> connect_another();
  void forget(hmc_net_ep_t* e);
  // Tests r (on either side) while progressing both contexts.
  hmc_plugin_status_t wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 20);

  const hmc_net_plugin_v2_t* t;
  Host ha, hb;
  int dev;
  hmc_net_ctx_t *a = nullptr, *b = nullptr;
  hmc_net_listener_t* l = nullptr;
  hmc_net_ep_t *ea = nullptr, *eb = nullptr;
  std::vector<hmc_net_ep_t*> more;
  uint8_t handle[HMC_NET_HANDLE_MAX] = {};
  size_t handle_len = 0;
};

// A NetTest whose body runs on a LocalPair in a child process.
class NetLocal : public NetTest {
 protected:
  void local(const std::function<void(LocalPair&)>& body, uint32_t timeout_ms = 5000);
};

bool readable_within(int fd, int timeout_ms);

// A caller compiled against a shorter hmc_net_device_props_t (its header, of ABI version
// abi_version, and the name) gets device 0's name, `name`, and nothing past its struct.
void expect_short_device_props(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* c, uint32_t abi_version,
                               const char* name);

// A setting and its value.
using Setting = std::pair<std::string, std::string>;
// Each setting alone makes the plugin's init fail with CONFIG, making no context, and a log
// line name the setting. The host prints from print_level (HMC_LOG_ERROR - 1: nothing).
void expect_settings_refused(const hmc_net_plugin_v2_t* t, const std::vector<Setting>& bad,
                             int print_level = HMC_LOG_ERROR - 1);

// The settings a plugin's init must refuse, each alone (configs.cpp), for NetSettings.
struct RefusedSettings {
  std::string plugin;
  std::vector<Setting> bad;
  int print_level = HMC_LOG_ERROR - 1;  // the host prints from this level
};
void PrintTo(const RefusedSettings& r, std::ostream* os);
std::vector<RefusedSettings> net_refused_settings();
// Arms until the context agrees that sleeping is safe (a few progress calls at most).
hmc_plugin_status_t arm_until_idle(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* c);

// ---------------------------------------------------------------------------------------------
// Scenario helpers

// Posts receives for sizes[i] under tag base+i, signals the peer, checks pattern seed+i and
// that nothing past each length was written.
void receive_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed);
// Waits for the peer's signal, sends sizes[i] under tag base+i with pattern seed+i.
void send_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed);

// A registration shipped to the peer as {base address, packed rkey}.
struct RemoteRegion {
  uint64_t base = 0;
  std::vector<uint8_t> rkey;
};
void send_region(Side& s, uint64_t base, const std::vector<uint8_t>& rkey);
RemoteRegion recv_region(Side& s);
// The peer's region (recv_region) in *rr, its key unpacked on s: the key, or nullptr (a test
// failure) where it did not unpack.
hmc_net_rkey_t* recv_key(Side& s, RemoteRegion* rr);
// The owner's last step: deregisters mr and tells the peer (signal).
void withdraw_region(Side& s, hmc_net_mr_t* mr);

// Host memory registered on s's context and device (a test failure when it is refused).
hmc_net_mr_t* reg(Side& s, void* addr, size_t len, uint32_t access, std::vector<uint8_t>* rkey);
hmc_net_mr_t* reg(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* ctx, int dev, void* addr, size_t len,
                  uint32_t access, std::vector<uint8_t>* rkey);
hmc_net_rkey_t* unpack(Side& s, const std::vector<uint8_t>& packed);
// One put/get, waited for: its status.
hmc_plugin_status_t put(Side& s, const void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k);
hmc_plugin_status_t get(Side& s, void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k);

constexpr uint32_t kRemoteRw = HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;

}  // namespace net_test

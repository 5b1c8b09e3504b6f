// The SDK's net template (sdk/templates/net) on what hmc-plugin-check cannot reach through the
// ABI: its handshake refuses a connection without the handle's cookie (and keeps listening) and
// one of another wire version (naming both), and its option is checked as the contract says.
// Speaks the template's wire from a raw socket, so the layouts below mirror net_plugin.c's.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "hmc/plugin/net.h"

namespace {

struct WireHandle {
  uint32_t magic, version;
  uint64_t cookie;
  char name[48];
};
struct WireHello {
  uint32_t magic, version;
  uint64_t cookie;
};
constexpr uint32_t kMagic = 0x544d4348u;

// Host services over a map of variables, collecting what the plugin logs.
struct Host {
  hmc_host_services_t s{};
  std::map<std::string, std::string> vars;
  std::string log;
  Host() {
    s.hdr = HMC_ABI_HEADER_INIT(hmc_host_services_t);
    s.core_abi_min = s.core_abi_max = HMC_NET_ABI_VERSION;
    s.host_ctx = this;
    s.log = [](void* h, int, const char* m) {
      static_cast<Host*>(h)->log += std::string(m) + "\n";
    };
    s.log_enabled = [](void*, int) { return 1; };
    s.config_get = [](void* h, const char* n) -> const char* {
      auto& v = static_cast<Host*>(h)->vars;
      auto it = v.find(n);
      return it == v.end() ? nullptr : it->second.c_str();
    };
    s.now_ns = [](void*) -> uint64_t {
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
    };
    s.timeout_ms = 5000;
  }
};

class TemplateHandshake : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(HMC_TEMPLATE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    auto entry = reinterpret_cast<hmc_net_plugin_v2_entry_t>(dlsym(lib_, HMC_NET_PLUGIN_ENTRY_V2));
    ASSERT_NE(entry, nullptr);
    t_ = entry();
  }
  void TearDown() override {
    if (ctx_) t_->finalize(ctx_);
    if (lib_) dlclose(lib_);
  }

  // Connects a raw socket to the listener's name and sends hello; the socket, or -1.
  static int raw_connect(const WireHandle& h, const WireHello& hello) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    size_t n = strlen(h.name);
    memcpy(a.sun_path + 1, h.name, n);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a),
                socklen_t(offsetof(sockaddr_un, sun_path) + 1 + n)) != 0 ||
        send(fd, &hello, sizeof hello, MSG_NOSIGNAL) != ssize_t(sizeof hello)) {
      close(fd);
      return -1;
    }
    return fd;
  }

  // Calls accept until it answers something else than IN_PROGRESS, for at most ms.
  int accept_for(hmc_net_listener_t* l, hmc_net_ep_t** ep, int ms) {
    int st = HMC_PLUGIN_IN_PROGRESS;
    for (int i = 0; i < ms && st == HMC_PLUGIN_IN_PROGRESS; ++i) {
      st = t_->accept(l, ep);
      if (st == HMC_PLUGIN_IN_PROGRESS) usleep(1000);
    }
    return st;
  }

  // Initialises the plugin and opens a listener on device 0: its handle in *h (of *len bytes).
  void open_listener(WireHandle* h, size_t* len, hmc_net_listener_t** l) {
    ASSERT_EQ(t_->init(&host_.s, &ctx_), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t_->listen(ctx_, 0, h, len, l), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(*len, sizeof *h);
  }

  void* lib_ = nullptr;
  const hmc_net_plugin_v2_t* t_ = nullptr;
  Host host_;
  hmc_net_ctx_t* ctx_ = nullptr;
};

TEST_F(TemplateHandshake, AStrangerWithoutTheCookieIsClosedAndTheListenerKeepsWaiting) {
  WireHandle h{};
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_listener(&h, &len, &l));
  int fd = raw_connect(h, {kMagic, h.version, h.cookie + 1});
  ASSERT_GE(fd, 0);
  hmc_net_ep_t* ep = nullptr;
  EXPECT_EQ(accept_for(l, &ep, 100), HMC_PLUGIN_IN_PROGRESS);
  char byte;
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0) << "the stranger's connection is closed, unanswered";
  close(fd);
  EXPECT_NE(host_.log.find("without this handle's cookie"), std::string::npos) << host_.log;

  // The peer the handle was given to still connects.
  hmc_net_ep_t* conn = nullptr;
  ASSERT_EQ(t_->connect(ctx_, 0, &h, len, &conn), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(accept_for(l, &ep, 5000), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t_->ep_ready(conn), HMC_PLUGIN_SUCCESS);
  t_->close_ep(conn);
  t_->close_ep(ep);
  t_->close_listener(l);
}

TEST_F(TemplateHandshake, AnotherWireVersionFailsTheAcceptNamingBothVersions) {
  WireHandle h{};
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_listener(&h, &len, &l));
  int fd = raw_connect(h, {kMagic, h.version + 1, h.cookie});
  ASSERT_GE(fd, 0);
  hmc_net_ep_t* ep = nullptr;
  EXPECT_EQ(accept_for(l, &ep, 5000), HMC_PLUGIN_ERR_VERSION);
  EXPECT_NE(host_.log.find("the peer speaks wire version 2, this plugin 1"), std::string::npos)
      << host_.log;
  WireHello answer{};
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_EQ(recv(fd, &answer, sizeof answer, MSG_WAITALL), ssize_t(sizeof answer))
      << "the connector is told the acceptor's version";
  EXPECT_EQ(answer.version, h.version);
  close(fd);
  t_->close_listener(l);
}

TEST_F(TemplateHandshake, TheOptionIsCheckedAndItsDefaultAppliedByThePlugin) {
  for (const char* bad : {"12", "abc", "-1", "4096x", "2147483648"}) {
    host_.vars["HMC_TEMPLATE_SOCKBUF"] = bad;
    host_.log.clear();
    hmc_net_ctx_t* c = nullptr;
    EXPECT_EQ(t_->init(&host_.s, &c), HMC_PLUGIN_ERR_CONFIG) << bad;
    EXPECT_NE(host_.log.find(std::string("invalid HMC_TEMPLATE_SOCKBUF=\"") + bad + "\""),
              std::string::npos)
        << host_.log;
  }
  for (const char* good : {"0", "", "4096", "1048576"}) {
    host_.vars["HMC_TEMPLATE_SOCKBUF"] = good;
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(t_->init(&host_.s, &c), HMC_PLUGIN_SUCCESS) << good;
    t_->finalize(c);
  }
  host_.vars.clear();  // unset: config_get answers NULL, the plugin applies its default
  ASSERT_EQ(t_->init(&host_.s, &ctx_), HMC_PLUGIN_SUCCESS);
  EXPECT_STREQ(t_->config_vars[0].name, "HMC_TEMPLATE_SOCKBUF");
  EXPECT_STREQ(t_->config_vars[0].default_value, "0");
}

}  // namespace

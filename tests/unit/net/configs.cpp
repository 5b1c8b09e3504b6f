// The net plugin configurations the suite runs over. A plugin that is not built here, or has no
// device here with a configuration's settings (init answers NO_DEVICE), is skipped with the
// reason. Testing another plugin is adding its entries here (and, for what is particular to it,
// a <plugin>_test.cpp).
#include <sys/syscall.h>

#include "suite.h"

namespace net_test {
namespace {

constexpr size_t kHoststageTcpEager = 64 << 10;
constexpr size_t kHoststageShmEager = 16 << 10;
constexpr size_t kOneGiB = size_t{1} << 30;

// hoststage: device 0 is tcp (streams 1, 2 (default), 4, and interface binding), device 1 is
// shm (with and without cross-memory attach, with it from a low size, with the kernel refusing
// it). The eager limits are set explicitly; settings beyond them make a variant.
NetConfig hoststage(const std::string& variant, int dev, const Cfg& extra = {}) {
  NetConfig c;
  c.name = "hoststage_" + variant;
  c.plugin = "hoststage";
  c.dev = dev;
  c.cfg = {{"HMC_HOSTSTAGE_EAGER_LIMIT", std::to_string(kHoststageTcpEager)},
           {"HMC_HOSTSTAGE_SHM_EAGER_LIMIT", std::to_string(kHoststageShmEager)}};
  for (const auto& kv : extra) c.cfg[kv.first] = kv.second;
  c.eager = dev == 0 ? kHoststageTcpEager : kHoststageShmEager;
  c.largest = 64u << 20;  // several chunks on every stream
  c.variant = !extra.empty();
  return c;
}

// shm with a low eager limit, the size above which a message goes by one cross-memory copy:
// small and odd sizes take the single-copy path, in chunks smaller than a message.
NetConfig hoststage_shm_single_copy_from(size_t eager) {
  NetConfig c = hoststage("shm_single_copy", 1,
                          {{"HMC_HOSTSTAGE_SHM_EAGER_LIMIT", std::to_string(eager)},
                           {"HMC_HOSTSTAGE_SHM_CHUNK", "64K"}});
  c.eager = eager;
  return c;
}

// shm on a host that refuses cross-memory attach (EPERM, as Yama's ptrace_scope or a container's
// seccomp profile do): the first copy fails, the endpoint falls back to the Unix socket.
NetConfig hoststage_shm_cma_refused() {
  NetConfig c = hoststage("shm_cma_refused", 1, {{"HMC_HOSTSTAGE_SHM_CHUNK", "256K"}});
  c.refused_syscalls = {SYS_process_vm_readv, SYS_process_vm_writev};
  return c;
}

// ucx: the transports that work on any Linux machine, passed as HMC_UCX_TLS; tcp on loopback
// only. Error mode: the plugin's default (none for tcp, peer with shared memory).
NetConfig ucx(const std::string& variant, const std::string& tls) {
  NetConfig c;
  c.name = "ucx_" + variant;
  c.plugin = "ucx";
  c.cfg = {{"HMC_UCX_TLS", tls}};
  if (tls == "tcp") c.cfg["HMC_UCX_NET_DEVICES"] = "lo";
  c.gaps = kStaleKeysAccepted | kTruncatedDataUnset;
  if (tls != "tcp") c.gaps |= kSendsWaitForPeer;
  c.gaps_doc = "plugins/net-ucx/README.md";
  return c;
}

// ofi: the libfabric providers that need no special hardware, passed as HMC_OFI_PROVIDER.
NetConfig ofi(const std::string& provider) {
  NetConfig c;
  c.name = "ofi_" + provider;
  c.plugin = "ofi";
  c.cfg = {{"HMC_OFI_PROVIDER", provider}};
  c.eager = 8 << 10;  // HMC_OFI_EAGER_LIMIT's default
  // RDM endpoints have no connection to watch; accesses are checked by the initiator from the
  // key; shm has no wait object.
  c.gaps = kPeerCloseUnseen | kStaleKeysAccepted | kNoEmptyRegions | kReadyAfterLoss |
           kArrivedDroppedOnLoss;
  c.gaps |= kConnectTimesOut;
  if (provider == "shm") c.gaps |= kTimerWaitFd | kStuckReadOnDeath;
  c.gaps_doc = "plugins/net-ofi/README.md";
  c.logs.peer_lost = "peer lost";
  c.logs.no_answer = "did not answer";
  return c;
}

// ibverbs: RC queue pairs over whatever RDMA device is here (skipped, with the reason, where
// there is none; the QEMU test bed of tests/rdma gives rdma_rxe devices). Device 0 talks to
// itself (loopback through the HCA); with two devices (the test bed's veth topology) device 1
// too, and ibverbs_test.cpp crosses them.
NetConfig ibverbs(const std::string& variant, int dev) {
  NetConfig c;
  c.name = "ibverbs_" + variant;
  c.plugin = "ibverbs";
  c.dev = dev;
  c.cfg = {{"HMC_IB_EAGER_LIMIT", "8K"}};
  c.eager = 8 << 10;
  c.largest = (8u << 20) + 5;  // a few RDMA READ pieces; rxe under emulation moves ~40 MB/s
  // Credit-based flow control: eager sends beyond the peer's credits wait for its progress.
  c.gaps = kSendsWaitForPeer;
  c.gaps_doc = "plugins/net-ibverbs/README.md";
  c.logs.peer_lost = "peer lost";
  return c;
}

}  // namespace

const std::vector<NetConfig>& net_configs() {
  static const std::vector<NetConfig> configs = [] {
    std::vector<NetConfig> v = {
        hoststage("tcp", 0),
        hoststage("tcp_streams1", 0, {{"HMC_HOSTSTAGE_STREAMS", "1"}}),
        hoststage("tcp_streams4", 0,
                  {{"HMC_HOSTSTAGE_STREAMS", "4"}, {"HMC_HOSTSTAGE_CHUNK", "256K"}}),
        hoststage("tcp_ifnames_lo", 0,
                  {{"HMC_HOSTSTAGE_STREAMS", "3"}, {"HMC_HOSTSTAGE_IFNAMES", "lo,lo"}}),
        hoststage("shm", 1),
        hoststage("shm_nocma", 1,
                  {{"HMC_HOSTSTAGE_SHM_CMA", "0"}, {"HMC_HOSTSTAGE_SHM_CHUNK", "256K"}}),
        hoststage_shm_single_copy_from(4 << 10),
        hoststage_shm_cma_refused(),
        ucx("tcp", "tcp"),
        ucx("shm", "posix,cma,self"),
        ofi("tcp"),
        ofi("shm"),
        ibverbs("dev0", 0),
    };
    // One 1 GiB message over the default hoststage configurations.
    for (NetConfig& c : v)
      if (c.name == "hoststage_tcp" || c.name == "hoststage_shm") c.huge = kOneGiB;
    return v;
  }();
  return configs;
}

// Settings each plugin refuses (NetSettings, contract_test.cpp): a malformed list, a number out
// of range or with a unit it does not take, a word it does not know.
std::vector<RefusedSettings> net_refused_settings() {
  return {
      {"hoststage",
       {
           {"HMC_HOSTSTAGE_STREAMS", "abc"},
           {"HMC_HOSTSTAGE_STREAMS", "0"},
           {"HMC_HOSTSTAGE_STREAMS", "65"},
           {"HMC_HOSTSTAGE_STREAMS", "2x"},
           {"HMC_HOSTSTAGE_SHM", "maybe"},
           {"HMC_HOSTSTAGE_SHM_CMA", "2"},
           {"HMC_HOSTSTAGE_EAGER_LIMIT", "-1"},
           {"HMC_HOSTSTAGE_EAGER_LIMIT", "2M"},
           {"HMC_HOSTSTAGE_SHM_RING", "100K"},
           {"HMC_HOSTSTAGE_SHM_EAGER_LIMIT", "1M"},
           {"HMC_HOSTSTAGE_CHUNK", "1"},
           {"HMC_HOSTSTAGE_CHUNK", "4Q"},
           {"HMC_HOSTSTAGE_SHM_CHUNK", "2G"},
           {"HMC_HOSTSTAGE_SOCKBUF", "lots"},
           {"HMC_HOSTSTAGE_IFNAMES", "lo,,lo"},
           {"HMC_HOSTSTAGE_IFNAMES", "hmcnosuchif0"},
           {"HMC_HOSTSTAGE_INJECT_ERRORS", "-1"},
           {"HMC_HOSTSTAGE_INJECT_ERRORS", "often"},
           {"HMC_LISTEN_HOST", "not a host name!"},
       }},
      {"ofi",
       {
           {"HMC_OFI_PROVIDER", "tcp,,shm"},
           {"HMC_OFI_PROVIDER", "t c p"},
           {"HMC_OFI_DOMAIN", "eth0;rm"},
           {"HMC_OFI_HMEM", "maybe"},
           {"HMC_OFI_PUT_COMPLETION", "now"},
           {"HMC_OFI_MR_CACHE", "-1"},
           {"HMC_OFI_RNDV", "push"},
           {"HMC_OFI_EAGER_LIMIT", "2M"},
           {"HMC_OFI_EAGER_LIMIT", "-5"},
           {"HMC_OFI_MR_CACHE", "12x"},
           {"HMC_OFI_MR_LOCAL", "2"},
           {"HMC_OFI_WRITE_CHUNK", "1K"},
           {"HMC_OFI_WRITE_CHUNK", "2G"},
           {"HMC_OFI_WRITE_CHUNK", "big"},
       }},
      {"ucx",
       {
           {"HMC_UCX_TLS", "tcp;rm -rf"},
           {"HMC_UCX_TLS", "tcp,,self"},
           {"HMC_UCX_TLS", "^"},
           {"HMC_UCX_NET_DEVICES", "lo eth0"},
           {"HMC_UCX_WAKEUP", "maybe"},
           {"HMC_UCX_ERROR_MODE", "sometimes"},
       },
       0},
  };
}

}  // namespace net_test

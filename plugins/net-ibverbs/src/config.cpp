#include "config.h"

#include "hmc/plugin/config.hpp"

namespace hmc::ibverbs {

const hmc_config_var_t kConfigVars[] = {
    {"HMC_IBVERBS_LIBRARY", "libibverbs.so.1", "the libibverbs to dlopen (a file name or path)"},
    {"HMC_IB_HCA", "",
     "ports to use, in order, as NCCL_IB_HCA: \"mlx5_0:1,mlx5_1\" (prefixes; no port: every "
     "port), \"^mlx5_1\" excludes, \"=mlx5_0\" matches names exactly; empty: every active port"},
    {"HMC_IB_GID_INDEX", "",
     "GID index on RoCE ports; empty: automatic (RoCE v2 with an IPv4-mapped address first)"},
    {"HMC_IB_TIMEOUT", "",
     "RC local ACK timeout exponent (4.096 us x 2^N per try, 1 to 31); empty: the largest for "
     "which all retries fit in half of HMC_TIMEOUT_MS"},
    {"HMC_IB_RETRY_CNT", "7", "RC transport retries before a silent peer is declared lost (0-7)"},
    {"HMC_IB_EAGER_LIMIT", "8K",
     "messages up to this size are copied through pre-posted receive buffers; larger ones are "
     "read by the receiver from the sender's buffer (RDMA READ) (64 to 64K)"},
    {"HMC_IB_CREDITS", "32",
     "eager messages one peer may have in flight towards this context (receive buffers it is "
     "granted in the shared receive queue) (4 to 1024)"},
    {"HMC_IB_CHUNK", "1M",
     "largest single RDMA READ or WRITE; larger transfers are cut (4K to 1G, capped by the "
     "port's max_msg_sz)"},
    {"HMC_IB_MR_CACHE", "1G",
     "local buffers the plugin registered itself (rendezvous sends, receives, puts and gets "
     "posted without an mr) stay registered for reuse up to this many bytes, least recently "
     "used dropped first; invalidated through userfaultfd when their memory is unmapped (where "
     "userfaultfd is unavailable the cache is off); 0: off"},
    {"HMC_IB_RAILS", "1",
     "most ports one endpoint stripes large puts, gets and rendezvous messages over (its own "
     "and the next active ports of the same link layer, in HMC_IB_HCA's order, each paired "
     "with a port of the peer's on its network), weighted by port speed (1 to 16; 1: no "
     "striping)"},
    {"HMC_IB_PEERMEM", "auto",
     "legacy GPUDirect: register CUDA (and ROCm) device memory by pointer (ibv_reg_mr) for puts "
     "and gets, where a peer-memory kernel module pins it for the HCA; auto: where "
     "nvidia_peermem or nv_peer_mem is loaded (ROCm: amdkfd's peer-memory client); on: assume "
     "it for CUDA (a module of another name); off: never (dma-buf, else staging). A region the "
     "HCA refuses is staged"},
    {"HMC_IB_FABRIC", "",
     "the fabric every port of this process reports, instead of its network (\"roce-v2:"
     "10.0.1.0/24\", \"ib:<subnet prefix>\"): set the same name on every host where every "
     "port reaches every other (routed L3 RoCE; at most 63 characters); empty: each port's "
     "network"},
    {"HMC_LISTEN_HOST", "127.0.0.1",
     "(core) control-plane address; the plugin's connection setup listens there (0.0.0.0: "
     "the port's IPv4 RoCE address, else 127.0.0.1)"},
    {nullptr, nullptr, nullptr},
};

hmc_plugin_status_t load_config(const hmc_host_services_t* host, const Log& log, Config* out) {
  Config c;
  hmc::plugin::ConfigReader r(host, log);
  constexpr hmc_plugin_status_t kBad = HMC_PLUGIN_ERR_CONFIG;  // the reader logged why
  std::string v;
  if (!(v = r.text("HMC_IBVERBS_LIBRARY")).empty()) c.library = v;
  if (!(v = r.text("HMC_IB_HCA")).empty()) {
    std::string why;
    if (!parse_hca_filter(v, &c.hca, &why)) {
      r.invalid("HMC_IB_HCA", v,
                "a list like \"mlx5_0:1,mlx5_1\", \"^mlx5_1\" or \"=mlx5_0\" (" + why + ")");
      return kBad;
    }
  }
  if (!r.read_int("HMC_IB_GID_INDEX", 0, 65535, &c.gid_index)) return kBad;
  if (!r.read_int("HMC_IB_TIMEOUT", 1, 31, &c.timeout)) return kBad;
  if (!r.read_int("HMC_IB_RETRY_CNT", 0, 7, &c.retry_cnt)) return kBad;
  if (!r.read_size("HMC_IB_EAGER_LIMIT", 64, kMaxEagerLimit, &c.eager_limit)) return kBad;
  if (!r.read_int("HMC_IB_CREDITS", uint32_t{4}, uint32_t{1024}, &c.credits)) return kBad;
  if (!r.read_size("HMC_IB_CHUNK", size_t{4} << 10, size_t{1} << 30, &c.chunk)) return kBad;
  if (!r.read_size("HMC_IB_MR_CACHE", 0, size_t{1} << 40, &c.mr_cache)) return kBad;
  if (!r.read_int("HMC_IB_RAILS", 1, 16, &c.rails)) return kBad;
  if (!(v = r.text("HMC_IB_PEERMEM")).empty() && !parse_peermem(v, &c.peermem)) {
    r.invalid("HMC_IB_PEERMEM", v, "auto, on or off");
    return kBad;
  }
  c.fabric = r.text("HMC_IB_FABRIC");
  if (c.fabric.size() > kMaxFabric) {
    r.invalid("HMC_IB_FABRIC", c.fabric,
              "a name of at most " + std::to_string(kMaxFabric) + " characters");
    return kBad;
  }
  if (!(v = r.text("HMC_LISTEN_HOST")).empty()) c.listen_host = v;
  *out = std::move(c);
  return HMC_PLUGIN_SUCCESS;
}

int timeout_for(uint32_t timeout_ms, int retry_cnt) {
  const double budget_us = timeout_ms * 1000.0 / 2 / (retry_cnt + 1);
  int t = 8;
  while (t < 24 && 4.096 * static_cast<double>(1ull << (t + 1)) <= budget_us) ++t;
  return t;
}

}  // namespace hmc::ibverbs

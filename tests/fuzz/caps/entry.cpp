// The capability record a peer sends after the hello (peer/messages.h: decode_caps), and what
// the engine does with it first: rank the paths between this side and the peer and choose one
// (path/path.h), the peer's figures and names as it declared them.
#include <cmath>

#include "control/wire.h"
#include "fuzz_target.h"
#include "path/path.h"
#include "peer/messages.h"

namespace hmc::fuzz {
namespace {

path::Capabilities local_caps() {
  path::Capabilities c;
  c.host_id = "node-a/0b1c2d3e";
  c.hostname = "node-a";
  c.pid = 4242;
  c.context_id = 0x1122334455667788ull;
  c.net.push_back({"hoststage", "tcp", 3000, 20000, 1, 3, 0});
  c.net.push_back({"hoststage", "shm", 9000, 1000, 1, 7, 1});
  c.net.push_back({"ibverbs", "mlx5_0:1", 12000, 2000, 3, 1, 0});
  c.stage_chunk = 4u << 20;
  c.device_count = 1;
  c.stage_first = (64u << 10) + 1;
  return c;
}

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  path::Capabilities remote;
  if (!msg::decode_caps(data, len, &remote)) return;
  control::Writer w1;
  msg::encode_caps(remote, &w1);
  path::Capabilities again;
  HMC_FUZZ_CHECK(msg::decode_caps(w1.data().data(), w1.size(), &again));
  control::Writer w2;
  msg::encode_caps(again, &w2);
  HMC_FUZZ_CHECK(w1.data() == w2.data());

  static const path::Capabilities local = local_caps();
  {
    const path::Capabilities* other = &remote;
    std::vector<path::Choice> ranked = path::rank(local, *other);
    for (const path::Choice& c : ranked) {
      HMC_FUZZ_CHECK(!std::isnan(c.score) && !std::isnan(c.bandwidth_MBps) &&
                     !std::isnan(c.latency_us));
      for (uint64_t size : path::kRankSizes) HMC_FUZZ_CHECK(!std::isnan(path::cost_us(c, size)));
    }
    path::Choice chosen;
    hmc_status_t st = path::choose(local, *other, "", &chosen);
    HMC_FUZZ_CHECK(st == HMC_SUCCESS || st == HMC_ERR_NO_PATH);
    HMC_FUZZ_CHECK((st == HMC_SUCCESS) == !ranked.empty());
    // The peer's own view (it ranks from its side).
    (void)path::rank(*other, local);
  }
}

std::vector<Seed> seeds() {
  std::vector<Seed> out;
  path::Capabilities same_host = local_caps();
  same_host.pid = 4343;
  same_host.context_id = 0x99;
  same_host.ipc_plugins = {"cuda"};
  same_host.features = path::kFeatureSharedBounces | path::kFeatureIpcOrShared;
  same_host.net[0].measured_bandwidth_MBps = 2500;
  same_host.net[0].measured_latency_ns = 25000;
  control::Writer w;
  msg::encode_caps(same_host, &w);
  out.push_back({"caps-same-host", w.data()});
  path::Capabilities other_host;
  other_host.host_id = "node-b/77";
  other_host.hostname = "node-b";
  other_host.pid = 17;
  other_host.net.push_back({"ucx", "tcp", 0, 0, 1, 0, 0});
  other_host.net.push_back({"ofi", "tcp;ofi_rxm", 1000, 40000, 1, 0, 2});
  control::Writer w2;
  msg::encode_caps(other_host, &w2);
  out.push_back({"caps-other-host", w2.data()});
  return out;
}

}  // namespace hmc::fuzz

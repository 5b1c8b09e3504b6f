#include "path/path.h"

#include <algorithm>

#include "hmc/plugin/net.h"
#include "util/status.h"

namespace hmc::path {

double cost_us(const Choice& c, uint64_t size) {
  return c.latency_us + static_cast<double>(size) / c.bandwidth_MBps;  // MB/s == bytes/us
}

namespace {
double bandwidth_of(const NetRecord& r) {
  return r.bandwidth_MBps ? static_cast<double>(r.bandwidth_MBps) : kDefaultBandwidthMBps;
}
double latency_of(const NetRecord& r) {
  return r.latency_ns ? r.latency_ns / 1000.0 : kDefaultLatencyUs;
}
bool same_host(const Capabilities& a, const Capabilities& b) {
  return !a.host_id.empty() && a.host_id == b.host_id;
}
std::string offered(const Capabilities& c) {
  std::string s;
  for (const auto& r : c.net) s += (s.empty() ? "" : ", ") + r.key();
  return s.empty() ? "nothing" : s;
}
}  // namespace

std::vector<Choice> rank(const Capabilities& local, const Capabilities& remote) {
  struct Ranked {
    Choice c;
    uint32_t preference;
    bool node_local;
  };
  std::vector<Ranked> found;
  for (const auto& l : local.net) {
    for (const auto& r : remote.net) {
      if (l.plugin != r.plugin || l.device != r.device) continue;
      if (!(l.flags & HMC_NET_FLAG_TAGGED) || !(r.flags & HMC_NET_FLAG_TAGGED)) continue;
      bool node_local = (l.flags | r.flags) & HMC_NET_FLAG_SAME_HOST;
      if (node_local && !same_host(local, remote)) continue;
      Choice c;
      c.plugin = l.plugin;
      c.device = l.device;
      // The slower side bounds the pair, and both sides compute the same numbers.
      c.bandwidth_MBps = std::min(bandwidth_of(l), bandwidth_of(r));
      c.latency_us = std::max(latency_of(l), latency_of(r));
      uint32_t pref = std::max(l.preference, r.preference);
      found.push_back({c, pref, node_local});
    }
  }
  std::sort(found.begin(), found.end(), [](const Ranked& a, const Ranked& b) {
    // An explicit HMC_NET_PLUGINS order wins; then cost; then node-local transports; then name.
    uint32_t pa = a.preference ? a.preference : UINT32_MAX;
    uint32_t pb = b.preference ? b.preference : UINT32_MAX;
    if (pa != pb) return pa < pb;
    double ca = cost_us(a.c, kRankSize), cb = cost_us(b.c, kRankSize);
    if (ca != cb) return ca < cb;
    if (a.node_local != b.node_local) return a.node_local;
    return a.c.key() < b.c.key();
  });
  std::vector<Choice> out;
  for (size_t i = 0; i < found.size(); ++i) {
    Choice c = found[i].c;
    c.reason = fmt::format("{:.0f} MB/s, {:.1f} us expected; ranked {} of {}", c.bandwidth_MBps,
                           c.latency_us, i + 1, found.size());
    if (found[i].preference) c.reason += " (HMC_NET_PLUGINS order)";
    out.push_back(std::move(c));
  }
  return out;
}

hmc_status_t choose(const Capabilities& local, const Capabilities& remote,
                    const std::string& forced, Choice* out) {
  std::vector<Choice> ranked = rank(local, remote);
  if (!forced.empty()) {
    for (const auto& c : ranked) {
      if (c.key() == forced) {
        *out = c;
        out->reason = "forced by HMC_PATH";
        return HMC_SUCCESS;
      }
    }
    return fail(HMC_ERR_NO_PATH,
                "HMC_PATH={} cannot reach the peer (pid {} on {}): usable paths are [{}]; this side "
                "offers [{}], the peer offers [{}]",
                forced, remote.pid, remote.hostname, [&] {
                  std::string s;
                  for (const auto& c : ranked) s += (s.empty() ? "" : ", ") + c.key();
                  return s;
                }(),
                offered(local), offered(remote));
  }
  if (ranked.empty())
    return fail(HMC_ERR_NO_PATH,
                "no data path to the peer (pid {} on {}): this side offers [{}], the peer offers "
                "[{}]",
                remote.pid, remote.hostname, offered(local), offered(remote));
  *out = ranked.front();
  return HMC_SUCCESS;
}

}  // namespace hmc::path

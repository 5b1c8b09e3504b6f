#include "path/path.h"

#include <algorithm>
#include <cstring>

#include "hmc/plugin/net.h"
#include "util/status.h"

namespace hmc::path {

double cost_us(const Choice& c, uint64_t size) {
  return c.latency_us + static_cast<double>(size) / c.bandwidth_MBps;  // MB/s == bytes/us
}

Figures figures_of(const NetRecord& r, bool same_host) {
  Figures f;
  bool declared = r.bandwidth_MBps != 0 || r.latency_ns != 0;
  bool measured = r.measured_bandwidth_MBps != 0 || r.measured_latency_ns != 0;
  // Bandwidth and latency are taken one by one: a plugin may declare its link speed only.
  if (r.bandwidth_MBps) {
    f.bandwidth_MBps = static_cast<double>(r.bandwidth_MBps);
  } else if (r.measured_bandwidth_MBps) {
    double m = static_cast<double>(r.measured_bandwidth_MBps);
    f.bandwidth_MBps = same_host ? m : std::min(kDefaultBandwidthMBps, m);
  } else {
    f.bandwidth_MBps = kDefaultBandwidthMBps;
  }
  if (r.latency_ns) {
    f.latency_us = r.latency_ns / 1000.0;
  } else if (r.measured_latency_ns) {
    double m = r.measured_latency_ns / 1000.0;
    f.latency_us = same_host ? m : std::max(kDefaultLatencyUs, m);
  } else {
    f.latency_us = kDefaultLatencyUs;
  }
  bool complete = r.bandwidth_MBps != 0 && r.latency_ns != 0;
  if (complete)
    f.basis = "declared";
  else if (measured && same_host)
    f.basis = declared ? "declared+measured" : "measured";
  else if (measured)
    f.basis = declared ? "declared+default, bounded by loopback" : "default, bounded by loopback";
  else
    f.basis = declared ? "declared+default" : "default";
  return f;
}

namespace {
bool same_host(const Capabilities& a, const Capabilities& b) {
  return !a.host_id.empty() && a.host_id == b.host_id;
}
std::string offered(const Capabilities& c) {
  std::string s;
  for (const auto& r : c.net) s += (s.empty() ? "" : ", ") + r.key();
  return s.empty() ? "nothing" : s;
}
std::string size_text(uint64_t size) {
  if (size >= (1u << 20) && size % (1u << 20) == 0) return fmt::format("{} MiB", size >> 20);
  if (size >= (1u << 10) && size % (1u << 10) == 0) return fmt::format("{} KiB", size >> 10);
  return fmt::format("{} B", size);
}
constexpr size_t kNumRankSizes = sizeof(kRankSizes) / sizeof(kRankSizes[0]);
}  // namespace

std::vector<Choice> rank(const Capabilities& local, const Capabilities& remote) {
  struct Ranked {
    Choice c;
    uint32_t preference;
    bool node_local;
    double ratio[kNumRankSizes];
    double score;  // largest ratio
    double sum;    // sum of ratios
    bool leading;  // score within kScoreTieBand of the best
  };
  bool one_host = same_host(local, remote);
  std::vector<Ranked> found;
  for (const auto& l : local.net) {
    for (const auto& r : remote.net) {
      if (l.plugin != r.plugin || l.pairs_by() != r.pairs_by()) continue;
      if (!(l.flags & HMC_NET_FLAG_TAGGED) || !(r.flags & HMC_NET_FLAG_TAGGED)) continue;
      bool node_local = (l.flags | r.flags) & HMC_NET_FLAG_SAME_HOST;
      if (node_local && !one_host) continue;
      Figures fl = figures_of(l, one_host), fr = figures_of(r, one_host);
      Ranked x{};
      x.c.plugin = l.plugin;
      x.c.device = l.device;
      x.c.peer_device = r.device;
      // The slower side bounds the pair; min and max keep it symmetric.
      x.c.bandwidth_MBps = std::min(fl.bandwidth_MBps, fr.bandwidth_MBps);
      x.c.latency_us = std::max(fl.latency_us, fr.latency_us);
      x.c.basis = std::strcmp(fl.basis, fr.basis) == 0
                      ? fl.basis
                      : std::min(std::string(fl.basis), std::string(fr.basis)) + " / " +
                            std::max(std::string(fl.basis), std::string(fr.basis));
      x.preference = std::max(l.preference, r.preference);
      x.node_local = node_local;
      found.push_back(std::move(x));
    }
  }
  // Worst-case slowdown of each candidate against the cheapest one, size by size.
  for (size_t s = 0; s < kNumRankSizes; ++s) {
    double best = 0;
    for (const auto& x : found) {
      double c = cost_us(x.c, kRankSizes[s]);
      if (best == 0 || c < best) best = c;
    }
    for (auto& x : found) x.ratio[s] = cost_us(x.c, kRankSizes[s]) / best;
  }
  for (auto& x : found) {
    x.score = *std::max_element(x.ratio, x.ratio + kNumRankSizes);
    x.sum = 0;
    for (double r : x.ratio) x.sum += r;
    x.c.score = x.score;
  }
  // Candidates whose worst-case slowdown is within kScoreTieBand of the best one are the
  // leading group: figures measured over loopback vary that much from run to run, so within it
  // a node-local transport goes first, then the smaller sum. Both sides compute the same.
  double best_score = 0;
  for (const auto& x : found)
    if (best_score == 0 || x.score < best_score) best_score = x.score;
  for (auto& x : found) x.leading = x.score <= best_score * kScoreTieBand;
  std::sort(found.begin(), found.end(), [](const Ranked& a, const Ranked& b) {
    uint32_t pa = a.preference ? a.preference : UINT32_MAX;
    uint32_t pb = b.preference ? b.preference : UINT32_MAX;
    if (pa != pb) return pa < pb;
    if (a.leading != b.leading) return a.leading;
    if (a.leading && a.node_local != b.node_local) return a.node_local;
    if (a.score != b.score) return a.score < b.score;
    if (a.sum != b.sum) return a.sum < b.sum;
    if (a.node_local != b.node_local) return a.node_local;
    return a.c.key() < b.c.key();
  });
  // The cheapest candidate at each size, named where another one is slower there.
  size_t cheapest[kNumRankSizes] = {};
  for (size_t s = 0; s < kNumRankSizes; ++s)
    for (size_t i = 0; i < found.size(); ++i)
      if (found[i].ratio[s] < found[cheapest[s]].ratio[s]) cheapest[s] = i;
  std::vector<Choice> out;
  for (size_t i = 0; i < found.size(); ++i) {
    const Ranked& x = found[i];
    Choice c = x.c;
    c.reason = fmt::format("{:.0f} MB/s, {:.1f} us expected ({}); ranked {} of {}",
                           c.bandwidth_MBps, c.latency_us, c.basis, i + 1, found.size());
    if (found.size() > 1) {
      std::string slow;
      for (size_t s = 0; s < kNumRankSizes; ++s)
        if (x.ratio[s] > 1.0)
          slow += fmt::format("{}{} {:.2f}x the time of {}", slow.empty() ? "" : ", ",
                              size_text(kRankSizes[s]), x.ratio[s], found[cheapest[s]].c.key());
      // Why the first is first although another is faster somewhere: the order above.
      bool others_lead = std::any_of(found.begin(), found.end(), [&](const Ranked& y) {
        return &y != &x && y.leading && !y.node_local && y.score < x.score;
      });
      std::string why = x.preference  ? ""
                        : others_lead ? ": a same-host transport within " +
                                            fmt::format("{:.2f}", kScoreTieBand) +
                                            "x of the smallest worst-case slowdown"
                                      : std::string(": the smallest worst-case slowdown");
      if (slow.empty())
        c.reason += ", fastest at every size ranked";
      else
        c.reason += (i == 0 ? why + "; at " : "; at ") + slow;
    }
    if (x.preference) c.reason += " (HMC_NET_PLUGINS order)";
    // A lone path is not measured at connect (there is nothing to rank it against, and the
    // measurement would cost every first connect a second): say so next to the placeholder
    // figures, so that nobody reads them as a measurement.
    if (found.size() == 1 && (c.basis == "default" || c.basis == "declared+default"))
      c.reason += "; not measured: the only path (hmc-info --calibrate measures it)";
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
    return fail(
        HMC_ERR_NO_PATH,
        "HMC_PATH={} cannot reach the peer (pid {} on {}): usable paths are [{}]; this side "
        "offers [{}], the peer offers [{}]",
        forced, remote.pid, remote.hostname,
        [&] {
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

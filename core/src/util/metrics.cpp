#include "util/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hmc {

const char* TransferCounters::op_label(int op) {
  static const char* const names[kOps] = {"send", "recv", "put", "get"};
  return op >= 0 && op < kOps ? names[op] : "unknown";
}

namespace {
// Indexed by -status (HMC_SUCCESS .. HMC_ERR_INTERNAL and a little room).
constexpr int kCodes = 32;
std::atomic<uint64_t> g_errors[kCodes];
}  // namespace

void count_error(hmc_status_t st) {
  if (st == HMC_SUCCESS || st == HMC_IN_PROGRESS) return;
  int i = -static_cast<int>(st);
  if (i <= 0 || i >= kCodes) return;
  g_errors[i].fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::pair<hmc_status_t, uint64_t>> error_counts() {
  std::vector<std::pair<hmc_status_t, uint64_t>> out;
  for (int i = 1; i < kCodes; ++i) {
    uint64_t n = g_errors[i].load(std::memory_order_relaxed);
    if (n) out.emplace_back(static_cast<hmc_status_t>(-i), n);
  }
  return out;
}

const std::vector<double>& LatencyHistogram::bounds_s() {
  static const std::vector<double> b = {1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3,
                                        5e-3, 1e-2, 5e-2, 0.1,  0.5,  1,    10};
  return b;
}

void LatencyHistogram::record(uint64_t ns) {
  const auto& b = bounds_s();
  const double s = double(ns) / 1e9;
  size_t i = std::lower_bound(b.begin(), b.end(), s) - b.begin();  // first bound >= s
  std::lock_guard<std::mutex> lock(mutex_);
  if (counts_.empty()) counts_.assign(b.size() + 1, 0);
  ++counts_[i];
  ++count_;
  sum_ns_ += ns;
}

LatencyHistogram::Snapshot LatencyHistogram::snapshot() const {
  Snapshot s;
  std::lock_guard<std::mutex> lock(mutex_);
  s.cumulative.assign(bounds_s().size() + 1, 0);
  uint64_t run = 0;
  for (size_t i = 0; i < s.cumulative.size(); ++i) {
    run += counts_.empty() ? 0 : counts_[i];
    s.cumulative[i] = run;
  }
  s.count = count_;
  s.sum_s = double(sum_ns_) / 1e9;
  return s;
}

void CollMetrics::posted(uint64_t handle, const Key& key, uint64_t bytes, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++by_key_[key].posted;
  in_flight_[handle] = InFlight{key, bytes, now_ns};
}

void CollMetrics::ended(uint64_t handle, hmc_status_t status, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(handle);
  if (it == in_flight_.end()) return;
  Totals& t = by_key_[it->second.key];
  if (status == HMC_SUCCESS) {
    ++t.completed;
    t.bytes += it->second.bytes;
    t.latency.record(now_ns > it->second.start_ns ? now_ns - it->second.start_ns : 0);
  } else {
    ++t.failed;
  }
  in_flight_.erase(it);
}

std::map<CollMetrics::Key, CollMetrics::Entry> CollMetrics::snapshot() const {
  std::map<Key, Entry> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, t] : by_key_) {
    Entry& e = out[key];
    e.posted = t.posted;
    e.completed = t.completed;
    e.failed = t.failed;
    e.bytes = t.bytes;
    e.latency = t.latency.snapshot();
  }
  return out;
}

std::string MetricsText::escape(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void MetricsText::family(const std::string& name, const std::string& type,
                         const std::string& help) {
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) order_.push_back(name);
  it->second.type = type;
  it->second.help = help;
}

namespace {
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v));
  return fmt::format("{}", v);
}
}  // namespace

void MetricsText::line(const std::string& family, const std::string& name, const Labels& labels,
                       double value) {
  std::string l = name;
  if (!labels.empty()) {
    l += '{';
    for (size_t i = 0; i < labels.size(); ++i)
      l += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape(labels[i].second));
    l += '}';
  }
  l += ' ' + number(value);
  auto [it, fresh] = families_.try_emplace(family);
  if (fresh) order_.push_back(family);
  it->second.lines.push_back(std::move(l));
}

void MetricsText::sample(const std::string& family, const Labels& labels, double value) {
  line(family, family, labels, value);
}

void MetricsText::histogram(const std::string& family, const Labels& labels,
                            const LatencyHistogram::Snapshot& s) {
  const auto& b = LatencyHistogram::bounds_s();
  for (size_t i = 0; i < s.cumulative.size(); ++i) {
    Labels l = labels;
    l.emplace_back("le", i < b.size() ? fmt::format("{}", b[i]) : "+Inf");
    line(family, family + "_bucket", l, double(s.cumulative[i]));
  }
  line(family, family + "_sum", labels, s.sum_s);
  line(family, family + "_count", labels, double(s.count));
}

std::string MetricsText::str() const {
  std::string out;
  for (const auto& name : order_) {
    const Family& f = families_.at(name);
    if (!f.help.empty()) out += fmt::format("# HELP {} {}\n", name, f.help);
    if (!f.type.empty()) out += fmt::format("# TYPE {} {}\n", name, f.type);
    for (const auto& l : f.lines) out += l + '\n';
  }
  return out;
}

}  // namespace hmc

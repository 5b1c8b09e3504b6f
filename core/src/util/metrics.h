// Counters the core keeps for operators, and their rendering in Prometheus' text exposition
// format (docs/metrics.md). The counters are plain relaxed atomics bumped where the event
// happens; the text is built only when somebody asks (hmc_metrics_dump, HMC_METRICS_ADDR,
// HMC_METRICS_FILE), so an unread counter costs one add.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hmc/hmc.h"

namespace hmc {

// Transfers with one peer that ended, by operation (index: send, recv, put, get, as Op in
// request/request.h). Written under the peer's net mutex (load and store, no read-modify-write on
// the path of every message); read anywhere.
struct TransferCounters {
  static constexpr int kOps = 4;
  static const char* op_label(int op);  // "send", "recv", "put", "get"
  struct PerOp {
    std::atomic<uint64_t> completed{0};  // ended with HMC_SUCCESS
    std::atomic<uint64_t> failed{0};     // ended with an error (cancelled included)
    std::atomic<uint64_t> bytes{0};      // bytes moved by the completed ones
  };
  PerOp op[kOps];
  void ended_locked(int index, bool ok, uint64_t moved) {
    if (index < 0 || index >= kOps) return;
    PerOp& o = op[index];
    auto bump = [](std::atomic<uint64_t>& c, uint64_t by) {
      c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    };
    if (ok) {
      bump(o.completed, 1);
      bump(o.bytes, moved);
    } else {
      bump(o.failed, 1);
    }
  }
};

// Errors the core reported to the application (set_error), process-wide, by status code.
void count_error(hmc_status_t st);
std::vector<std::pair<hmc_status_t, uint64_t>> error_counts();

// A latency histogram with fixed bounds (seconds, 1 us to 10 s by decades and halves).
class LatencyHistogram {
 public:
  static const std::vector<double>& bounds_s();
  void record(uint64_t ns);
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    uint64_t count = 0;
    double sum_s = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bound, then +Inf (not cumulative)
  uint64_t count_ = 0;
  uint64_t sum_ns_ = 0;
};

// Collectives by communicator, name ("all_reduce") and backend: posted, ended, their bytes and
// their latency from the post to the end the application saw (hmc_request_test or
// hmc_request_wait). Keyed by the request's handle while in flight. Thread-safe.
class CollMetrics {
 public:
  // Posted on the hot path of every collective: no allocation. name and backend point to
  // static strings.
  struct Key {
    uint64_t comm = 0;         // the communicator's id, the same on every rank
    const char* name = "";     // "all_reduce"
    const char* backend = "";  // how it ran: "hmc", "ccl", "hierarchical"
    bool operator<(const Key& o) const {
      if (comm != o.comm) return comm < o.comm;
      if (int c = std::strcmp(name, o.name)) return c < 0;
      return std::strcmp(backend, o.backend) < 0;
    }
  };
  void posted(uint64_t handle, const Key& key, uint64_t bytes, uint64_t now_ns);
  // Records the end of the collective posted as `handle`, if it was; no effect otherwise.
  void ended(uint64_t handle, hmc_status_t status, uint64_t now_ns);
  struct Entry {
    uint64_t posted = 0, completed = 0, failed = 0, bytes = 0;
    LatencyHistogram::Snapshot latency;
  };
  std::map<Key, Entry> snapshot() const;

 private:
  struct InFlight {
    Key key;
    uint64_t bytes;
    uint64_t start_ns;
  };
  struct Totals {
    uint64_t posted = 0, completed = 0, failed = 0, bytes = 0;
    LatencyHistogram latency;
  };
  mutable std::mutex mutex_;
  std::map<uint64_t, InFlight> in_flight_;
  std::map<Key, Totals> by_key_;
};

// Builds the exposition text: samples are grouped under their family's # HELP and # TYPE lines
// whatever the order they were added in.
class MetricsText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  // type: "counter", "gauge" or "histogram".
  void family(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& family, const Labels& labels, double value);
  void histogram(const std::string& family, const Labels& labels,
                 const LatencyHistogram::Snapshot& s);
  std::string str() const;

  // Escapes a label value (backslash, double quote, newline).
  static std::string escape(const std::string& value);

 private:
  struct Family {
    std::string type, help;
    std::vector<std::string> lines;
  };
  void line(const std::string& family, const std::string& name, const Labels& labels, double value);
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

}  // namespace hmc

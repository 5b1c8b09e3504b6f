// The context's metrics (docs/metrics.md): what its peers, transfers, collectives and errors
// counted, in Prometheus' text format, for hmc_metrics_dump, HMC_METRICS_ADDR and
// HMC_METRICS_FILE.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "context/context.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {
struct PeerRow {
  MetricsText::Labels labels;
  const Peer* peer;
  bool lost, closed;
};
}  // namespace

std::string Context::metrics_text() {
  MetricsText m;
  m.family("hmc_build_info", "gauge", "hmc's API version (the value is always 1)");
  m.sample("hmc_build_info",
           {{"api_version", fmt::format("{}.{}", HMC_API_VERSION_MAJOR, HMC_API_VERSION_MINOR)}},
           1);
  m.family("hmc_context_uptime_seconds", "gauge", "seconds since the context was created");
  m.sample("hmc_context_uptime_seconds", {}, double(elapsed_ns(now_ns(), created_ns_)) / 1e9);
  if (metrics_server_.running()) {
    m.family("hmc_metrics_endpoint_info", "gauge",
             "where HMC_METRICS_ADDR serves these metrics (the value is always 1)");
    m.sample("hmc_metrics_endpoint_info", {{"address", metrics_server_.address()}}, 1);
  }

  m.family("hmc_peers", "gauge",
           "peers of the context by state: live, lost (failed, not closed here) or closed "
           "(hmc_peer_close)");
  m.family("hmc_peer_up", "gauge", "1 while the peer is live, 0 once lost or closed");
  m.family("hmc_peer_pending_requests", "gauge", "requests with the peer not yet ended");
  m.family("hmc_transfers_total", "counter",
           "transfers with the peer that ended, by operation and result (completed or failed); "
           "collectives' own transfers included");
  m.family("hmc_transfer_bytes_total", "counter",
           "bytes moved by the completed transfers with the peer, by operation");
  m.family("hmc_peer_ipc_messages_total", "counter",
           "messages with the peer that crossed by device IPC");
  m.family("hmc_peer_staged_transfers_total", "counter",
           "transfers with the peer whose device memory went through pinned bounce buffers");
  m.family("hmc_peer_shared_staged_messages_total", "counter",
           "staged messages the receiver copied straight out of the sender's bounce buffers");
  m.family("hmc_peer_direct_transfers_total", "counter",
           "puts and gets of device memory with no bounce buffer on either side");
  m.family("hmc_peer_estimated_bandwidth_bytes_per_second", "gauge",
           "the path's expected bandwidth (path selection's figure)");
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    std::vector<PeerRow> rows;
    for (const auto& p : peers_) rows.push_back({{}, p.get(), p->lost.load(), false});
    for (const auto& p : closed_peers_) rows.push_back({{}, p.get(), p->lost.load(), true});
    uint64_t live = 0, lost = 0, closed = 0;
    for (PeerRow& r : rows) {
      const Peer& p = *r.peer;
      // conn tells apart two connections to one process (a communicator's and the
      // application's): the peer's ordinal in this context, fixed for its life.
      auto [it, fresh] = peer_ordinals_.try_emplace(r.peer, peer_ordinals_.size());
      (void)fresh;
      r.labels = {{"peer", fmt::format("{}:{}", p.remote.hostname, p.remote.pid)},
                  {"conn", std::to_string(it->second)},
                  {"path", p.choice.key()}};
      if (r.closed)
        ++closed;
      else if (r.lost)
        ++lost;
      else
        ++live;
      m.sample("hmc_peer_up", r.labels, !r.closed && !r.lost ? 1 : 0);
      m.sample("hmc_peer_pending_requests", r.labels,
               double(p.pending_count.load(std::memory_order_relaxed)));
      for (int op = 0; op < TransferCounters::kOps; ++op) {
        const auto& c = p.transfers_ended.op[op];
        MetricsText::Labels l = r.labels;
        l.emplace_back("op", TransferCounters::op_label(op));
        MetricsText::Labels ok = l, bad = l;
        ok.emplace_back("result", "completed");
        bad.emplace_back("result", "failed");
        m.sample("hmc_transfers_total", ok, double(c.completed.load(std::memory_order_relaxed)));
        m.sample("hmc_transfers_total", bad, double(c.failed.load(std::memory_order_relaxed)));
        m.sample("hmc_transfer_bytes_total", l, double(c.bytes.load(std::memory_order_relaxed)));
      }
      const auto& f = p.framing;
      m.sample("hmc_peer_ipc_messages_total", r.labels,
               double(f.ipc_messages.load(std::memory_order_relaxed)));
      m.sample("hmc_peer_staged_transfers_total", r.labels,
               double(f.staged_transfers.load(std::memory_order_relaxed)));
      m.sample("hmc_peer_shared_staged_messages_total", r.labels,
               double(f.shared_messages.load(std::memory_order_relaxed)));
      m.sample("hmc_peer_direct_transfers_total", r.labels,
               double(f.direct_transfers.load(std::memory_order_relaxed)));
      m.sample("hmc_peer_estimated_bandwidth_bytes_per_second", r.labels,
               p.choice.bandwidth_MBps * 1e6);
    }
    m.sample("hmc_peers", {{"state", "live"}}, double(live));
    m.sample("hmc_peers", {{"state", "lost"}}, double(lost));
    m.sample("hmc_peers", {{"state", "closed"}}, double(closed));
  }

  if (incoming_) {
    IncomingPeers::Stats s = incoming_->stats();
    m.family("hmc_incoming_connections_total", "counter",
             "incoming connections by outcome: accepted, failed (refused or broken), timed_out, "
             "dropped (evicted to keep HMC_MAX_PENDING_HANDSHAKES)");
    m.sample("hmc_incoming_connections_total", {{"outcome", "accepted"}}, double(s.accepted));
    m.sample("hmc_incoming_connections_total", {{"outcome", "failed"}}, double(s.failed));
    m.sample("hmc_incoming_connections_total", {{"outcome", "timed_out"}}, double(s.timed_out));
    m.sample("hmc_incoming_connections_total", {{"outcome", "dropped"}}, double(s.dropped));
  }

  m.family("hmc_collectives_total", "counter",
           "collectives by communicator, name, backend and stage: posted, completed or failed "
           "(as the application saw them end through hmc_request_test or hmc_request_wait)");
  m.family("hmc_collective_bytes_total", "counter",
           "bytes of the completed collectives (count times the datatype's size, per rank)");
  m.family("hmc_collective_latency_seconds", "histogram",
           "time from a collective's post to the end the application saw");
  for (const auto& [key, e] : coll_metrics_.snapshot()) {
    const MetricsText::Labels labels = {{"comm", fmt::format("{:016x}", key.comm)},
                                        {"collective", key.name},
                                        {"backend", key.backend}};
    auto with_stage = [&](const char* stage) {
      MetricsText::Labels l = labels;
      l.emplace_back("stage", stage);
      return l;
    };
    m.sample("hmc_collectives_total", with_stage("posted"), double(e.posted));
    m.sample("hmc_collectives_total", with_stage("completed"), double(e.completed));
    m.sample("hmc_collectives_total", with_stage("failed"), double(e.failed));
    m.sample("hmc_collective_bytes_total", labels, double(e.bytes));
    m.histogram("hmc_collective_latency_seconds", labels, e.latency);
  }

  m.family("hmc_errors_total", "counter",
           "errors hmc recorded for hmc_last_error, by status code, in the whole process (every "
           "failing call, and failures the core met and handled on its own)");
  for (const auto& [code, n] : error_counts())
    m.sample("hmc_errors_total", {{"code", status_name(code)}}, double(n));
  return m.str();
}

hmc_status_t Context::start_metrics() {
  metrics_ready_ = true;  // HMC_METRICS_FILE is written for a context that was made
  const std::string addr = config_.get("HMC_METRICS_ADDR");
  if (addr.empty()) return HMC_SUCCESS;
  return metrics_server_.start("HMC_METRICS_ADDR", addr, [this] { return metrics_text(); });
}

void Context::write_metrics_file() {
  std::string path = config_.get("HMC_METRICS_FILE");
  if (path.empty() || !metrics_ready_) return;
  for (size_t pos; (pos = path.find("%p")) != std::string::npos;)
    path.replace(pos, 2, std::to_string(getpid()));
  const std::string text = metrics_text();
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    HMC_LOG_W("HMC_METRICS_FILE: cannot open '{}': {}", path, strerror(errno));
    return;
  }
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = fclose(f) == 0 && ok;
  if (!ok) HMC_LOG_W("HMC_METRICS_FILE: writing '{}' failed: {}", path, strerror(errno));
}

}  // namespace hmc

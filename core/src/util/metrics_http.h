// The HTTP endpoint of HMC_METRICS_ADDR: one thread that answers GET /metrics with the text a
// callback builds, one connection at a time, each bounded in size and time, so that a slow or
// hostile scraper can delay the next scrape but never the application.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "hmc/hmc.h"

namespace hmc {

// Parses "host:port" or "port" (host 127.0.0.1). False with a reason in *err otherwise.
bool parse_metrics_address(const std::string& text, std::string* host, uint16_t* port,
                           std::string* err);

class MetricsServer {
 public:
  MetricsServer() = default;
  ~MetricsServer() { stop(); }
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds host:port (port 0: a free one) and starts serving. HMC_ERR_CONFIG naming `setting`
  // for an address it cannot parse, HMC_ERR_SYSTEM when it cannot listen.
  hmc_status_t start(const std::string& setting, const std::string& address,
                     std::function<std::string()> render);
  void stop();
  bool running() const { return thread_.joinable(); }
  // "127.0.0.1:9464", the address it listens on (the port it was given, or the one picked).
  const std::string& address() const { return bound_; }

  static constexpr int kRequestTimeoutMs = 2000;  // to read a request and write its answer
  static constexpr size_t kRequestMax = 8192;     // bytes of request head read at most

 private:
  void serve();
  void answer(int fd);
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: stop() writes, serve() polls it with the listener
  std::string bound_;
  std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace hmc

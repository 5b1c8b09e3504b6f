// The rendezvous store of communicators (docs/collectives.md): a key-value store that rank 0
// hosts on the rendezvous address (tcp://host:port) while the ranks exchange what each must know
// of the others. Every call is bounded by a deadline; a store that cannot be reached, or goes
// away, is an error naming it, never a hang.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "control/fd.h"
#include "hmc/hmc.h"

namespace hmc::coll {

// The store's server: one thread answering every client. Runs until destroyed.
class StoreServer {
 public:
  StoreServer() = default;
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  // Binds host:port (HMC_ERR_SYSTEM, naming the address, when it cannot) and starts serving.
  hmc_status_t start(const std::string& host, uint16_t port);

 private:
  void serve();

  control::Fd listener_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::map<std::string, std::string> data_;  // the server thread's alone
};

class StoreClient {
 public:
  // Connects to host:port, retrying until the deadline (the host may start later).
  // HMC_ERR_SYSTEM with the last error when it cannot.
  hmc_status_t connect(const std::string& host, uint16_t port, uint64_t deadline_ns);
  hmc_status_t set(const std::string& key, const std::string& value, uint64_t deadline_ns);
  // *found false when the key is not there (yet).
  hmc_status_t get(const std::string& key, std::string* value, bool* found, uint64_t deadline_ns);
  // Stores value under key unless the key has one; *stored receives the value the key has now.
  hmc_status_t claim(const std::string& key, const std::string& value, std::string* stored,
                     uint64_t deadline_ns);

 private:
  hmc_status_t call(uint8_t op, const std::string& key, const std::string& value, bool* found,
                    std::string* reply, uint64_t deadline_ns);

  control::Fd fd_;
  std::string where_;
};

}  // namespace hmc::coll

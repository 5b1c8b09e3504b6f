// One hmc-soak worker: a process with one hmc context for its whole life, which runs the epochs
// the launcher gives it (a communicator of the workers alive then, their peers and regions, a
// seeded mix of every kind of traffic, each payload checked at its receiver) and reports what
// came of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace soak {

struct WorkerSetup {
  int id = 0;
  int cmd_fd = -1;  // the launcher's commands
  int rep_fd = -1;  // this worker's reports
  uint64_t seed = 0;
  size_t max_size = 0;
  int timeout_ms = 0;              // HMC_TIMEOUT_MS of the context
  int hang_ms = 0;                 // a wait longer than this is a hang
  uint64_t inject_corruption = 0;  // flip a byte of every N-th payload checked (0: never)
  bool injecting = false;  // runs with HMC_HOSTSTAGE_INJECT_ERRORS: its plugin errors are faults
  std::string device;      // the emulated device whose memory it also uses ("cuda:0"); "" none
};

// Runs until the launcher says quit or goes; the process's exit status.
int worker_main(const WorkerSetup& setup);

// CLOCK_MONOTONIC in nanoseconds: the launcher and its workers share the clock.
int64_t mono_ns();

}  // namespace soak

// Which process is at the other end, and whether it is still alive.
//
// UCX notices a dead peer by itself over tcp (the socket breaks) and over IB (timeouts,
// keepalive), but not over its shared-memory transports: a SIGKILLed same-host peer leaves its
// endpoint "up" forever. So both sides exchange a ProcessIdentity during connection setup, and a
// peer found in the same kernel and pid namespace is watched through a pidfd (or, on kernels
// without pidfd_open, by its pid and start time): when the process exits, its endpoint fails
// with PEER_LOST. Peers elsewhere are left to UCX.
#pragma once

#include <cstdint>

namespace hmc::ucx {

struct ProcessIdentity {
  uint64_t boot = 0;   // hash of /proc/sys/kernel/random/boot_id (0: unknown)
  uint64_t pidns = 0;  // inode of /proc/self/ns/pid (0: unknown)
  uint64_t start = 0;  // start time in clock ticks since boot (/proc/<pid>/stat field 22)
  uint32_t pid = 0;

  // This process.
  static ProcessIdentity self();
  bool known() const { return boot != 0 && pidns != 0 && pid != 0 && start != 0; }
  // Same kernel and pid namespace: `pid` means the same process here.
  bool same_pid_space(const ProcessIdentity& o) const {
    return known() && o.known() && boot == o.boot && pidns == o.pidns;
  }
};

// Watches one same-host process. Not copyable; closes its pidfd.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Starts watching `peer` (which must be in this process's pid space). False when the process
  // is already gone (or its pid now belongs to another process).
  bool start(const ProcessIdentity& peer);
  bool active() const { return pid_ != 0; }
  // The pidfd (readable once the process exits), or -1 (then alive() checks /proc).
  int fd() const { return fd_; }
  // For watches without a pidfd: whether the process still exists.
  bool alive() const;

 private:
  int fd_ = -1;
  uint32_t pid_ = 0;
  uint64_t start_ = 0;
};

}  // namespace hmc::ucx

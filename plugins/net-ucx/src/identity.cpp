#include "identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace hmc::ucx {

namespace {

// Whole small file into buf (NUL-terminated); false when it cannot be read.
bool read_small(const char* path, char* buf, size_t cap) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, cap - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

uint64_t fnv1a(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) {
    h ^= static_cast<unsigned char>(*s);
    h *= 0x100000001b3ull;
  }
  return h ? h : 1;
}

// Field 22 of /proc/<pid>/stat: the start time, counted after the ")" that ends the command
// name (which may itself contain spaces and parentheses). 0 when the process does not exist or
// has exited (a zombie, state Z or X, keeps its /proc entry until it is reaped).
uint64_t start_time_of(uint32_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  char buf[1024];
  if (!read_small(path, buf, sizeof(buf))) return 0;
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X')) return 0;
  // p is at the space before field 3 (the state); each step moves to the next field's space.
  for (int field = 3; field < 22 && p != nullptr; ++field) {
    p = std::strchr(p + 1, ' ');
  }
  if (p == nullptr) return 0;
  return std::strtoull(p + 1, nullptr, 10);
}

}  // namespace

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity id;
  char buf[128];
  if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof(buf))) id.boot = fnv1a(buf);
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) == 0) id.pidns = static_cast<uint64_t>(st.st_ino);
  id.pid = static_cast<uint32_t>(::getpid());
  id.start = start_time_of(id.pid);
  return id;
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) ::close(fd_);
}

bool ProcessWatch::start(const ProcessIdentity& peer) {
  long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(peer.pid), 0);
  // The pid must still be the peer's: compare its start time (after opening the pidfd, so that
  // the pidfd cannot refer to a process that took the pid over in between).
  if (start_time_of(peer.pid) != peer.start) {
    if (fd >= 0) ::close(static_cast<int>(fd));
    return false;
  }
  fd_ = fd >= 0 ? static_cast<int>(fd) : -1;
  pid_ = peer.pid;
  start_ = peer.start;
  return true;
}

bool ProcessWatch::alive() const {
  if (pid_ == 0) return true;
  return start_time_of(pid_) == start_;
}

}  // namespace hmc::ucx

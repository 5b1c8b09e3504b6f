// Harness for the multi-process integration tests: shared by the test executables and by the
// peer program (hmc-test-peer), so it uses only hmc.h and POSIX, never gtest.
//
// What it offers:
//  - status text: describe() turns a status and the thread's hmc_last_error() into one line;
//  - hex encoding of address blobs and region descriptors (they travel on argv);
//  - pattern fill/check: bytes that depend on a seed and on their logical offset, so a byte
//    that landed at the wrong place or a stale byte is caught, with the first bad offset named;
//  - environment overrides: ScopedEnv for the test process, child_environment() for a peer;
//  - PeerProcess: posix_spawn a peer with argv + environment, capture its stdout/stderr,
//    wait with a timeout (SIGKILL on timeout), and never leave it orphaned (RAII);
//  - RAII wrappers for a context, host buffers, regions, remotes and in-flight requests;
//  - blocking helpers over a peer (send/recv/control values) with bounded waits.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hmc/hmc.h"

extern char** environ;

// Whether this build runs under AddressSanitizer (the 1 GiB tests skip there: ASan's shadow
// memory and slow memcpy make them take minutes and gigabytes more).
#if defined(__SANITIZE_ADDRESS__)
#define HMC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HMC_TEST_ASAN 1
#endif
#endif
#ifndef HMC_TEST_ASAN
#define HMC_TEST_ASAN 0
#endif

namespace hmc_test {

// ---------------------------------------------------------------------------------------------
// Status text

// What describe() says when a failed call left no message (a bug in itself).
constexpr const char* kNoMessage = "(hmc_last_error() is empty)";

// "HMC_ERR_TIMEOUT: <hmc_last_error()>". Call it right after the failing hmc call (the message
// is per thread and replaced by the next call).
inline std::string describe(hmc_status_t st) {
  std::string s = hmc_status_string(st);
  if (st != HMC_SUCCESS && st != HMC_IN_PROGRESS) {
    const char* msg = hmc_last_error();
    s += ": ";
    s += (msg && *msg) ? msg : kNoMessage;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Time

using Clock = std::chrono::steady_clock;
inline int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// Hex

inline std::string hex_encode(const void* data, size_t len) {
  static const char digits[] = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out(len * 2, '0');
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

// False on odd length or a non-hex character.
inline bool hex_decode(const std::string& text, std::vector<uint8_t>* out) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() % 2) return false;
  std::vector<uint8_t> bytes(text.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  *out = std::move(bytes);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Patterns. The byte at logical offset `off` under `seed` is byte (off % 8) of a 64-bit mix of
// (seed, off / 8), so every 8-byte word differs and a shifted or stale copy does not match.
// Buffers that hold a part of a larger logical stream pass the part's logical offset.

inline uint64_t pattern_word(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint8_t pattern_byte(uint64_t seed, uint64_t off) {
  return static_cast<uint8_t>(pattern_word(seed, off / 8) >> (8 * (off % 8)));
}

inline void pattern_fill(void* buf, size_t size, uint64_t seed, uint64_t logical_offset = 0) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t i = 0;
  for (; i < size && (logical_offset + i) % 8; ++i) p[i] = pattern_byte(seed, logical_offset + i);
  for (; i + 8 <= size; i += 8) {
    uint64_t w = pattern_word(seed, (logical_offset + i) / 8);
    memcpy(p + i, &w, 8);  // little-endian hosts: byte k of w is byte k of the word
  }
  for (; i < size; ++i) p[i] = pattern_byte(seed, logical_offset + i);
}

// Offset (relative to buf) of the first byte that differs from the pattern; SIZE_MAX if none.
inline size_t pattern_mismatch(const void* buf, size_t size, uint64_t seed,
                               uint64_t logical_offset = 0) {
  const auto* p = static_cast<const uint8_t*>(buf);
  constexpr size_t kBlock = 16384;
  uint8_t expect[kBlock];
  for (size_t done = 0; done < size; done += kBlock) {
    size_t n = size - done < kBlock ? size - done : kBlock;
    pattern_fill(expect, n, seed, logical_offset + done);
    if (memcmp(expect, p + done, n) == 0) continue;
    for (size_t i = 0; i < n; ++i)
      if (expect[i] != p[done + i]) return done + i;
  }
  return SIZE_MAX;
}

// "" when buf holds the pattern, else a line naming the first bad offset and both bytes.
inline std::string pattern_check(const void* buf, size_t size, uint64_t seed,
                                 uint64_t logical_offset = 0) {
  size_t bad = pattern_mismatch(buf, size, seed, logical_offset);
  if (bad == SIZE_MAX) return "";
  char line[256];
  snprintf(line, sizeof line,
           "first bad byte at offset %zu of %zu: got 0x%02x, expected 0x%02x (seed %llu, logical "
           "offset %llu)",
           bad, size, static_cast<const uint8_t*>(buf)[bad],
           pattern_byte(seed, logical_offset + bad), static_cast<unsigned long long>(seed),
           static_cast<unsigned long long>(logical_offset + bad));
  return line;
}

// Like pattern_check, against an explicit expected image (for regions that several puts wrote).
inline std::string bytes_check(const void* got, const void* want, size_t size) {
  if (memcmp(got, want, size) == 0) return "";
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  size_t i = 0;
  while (g[i] == w[i]) ++i;
  char line[160];
  snprintf(line, sizeof line, "first bad byte at offset %zu of %zu: got 0x%02x, expected 0x%02x", i,
           size, g[i], w[i]);
  return line;
}

// ---------------------------------------------------------------------------------------------
// Environment

// One override: a value to set, or std::nullopt to unset the variable.
struct EnvVar {
  std::string name;
  std::optional<std::string> value;
};
using EnvOverrides = std::vector<EnvVar>;

// What the holders below derive from: each owns what it holds, so none is copied.
struct NoCopy {
  NoCopy() = default;
  NoCopy(const NoCopy&) = delete;
  NoCopy& operator=(const NoCopy&) = delete;
};

// Applies overrides to this process and restores the previous values when it goes out of
// scope. Set before any hmc_context_create that must see them (the core reads the environment
// at context creation); not for use while other threads read the environment.
class ScopedEnv : NoCopy {
 public:
  ScopedEnv() = default;
  explicit ScopedEnv(const EnvOverrides& vars) { apply(vars); }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) set(it->name, it->value);
  }
  void apply(const EnvOverrides& vars) {
    for (const auto& v : vars) {
      const char* old = getenv(v.name.c_str());
      saved_.push_back({v.name, old ? std::optional<std::string>(old) : std::nullopt});
      set(v.name, v.value);
    }
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value)
      setenv(name.c_str(), value->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
  EnvOverrides saved_;
};

// This process's environment with the overrides applied ("NAME=value" strings).
inline std::vector<std::string> child_environment(const EnvOverrides& vars) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& v : vars) {
    std::string prefix = v.name + "=";
    for (size_t i = 0; i < env.size();) {
      if (env[i].compare(0, prefix.size(), prefix) == 0)
        env.erase(env.begin() + i);
      else
        ++i;
    }
    if (v.value) env.push_back(prefix + *v.value);
  }
  return env;
}

// ---------------------------------------------------------------------------------------------
// Peer processes

// How a peer process ended.
struct ExitInfo {
  bool exited = false;  // exited normally, with `code`
  int code = -1;
  int signal = 0;          // killed by this signal
  bool timed_out = false;  // we killed it because it outlived the wait
  std::string output;      // its stdout and stderr

  bool ok() const { return exited && code == 0 && !timed_out; }
  std::string describe() const {
    std::string s;
    if (timed_out)
      s = "did not exit in time and was killed";
    else if (exited)
      s = "exited with code " + std::to_string(code);
    else if (signal)
      s = std::string("was killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) +
          ")";
    else
      s = "state unknown";
    s += "; its output:\n" + (output.empty() ? std::string("(none)") : output);
    return s;
  }
};

// A child process started with posix_spawn. Its stdin is /dev/null, its stdout and stderr go
// to an unlinked temporary file read back by wait(), and it gets no other descriptor of ours.
// The destructor SIGKILLs and reaps a child still running, so a failing test never leaves one
// behind (the peer program also asks the kernel for SIGKILL when its parent dies).
class PeerProcess : NoCopy {
 public:
  ~PeerProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      int status;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (pidfd_ >= 0) close(pidfd_);
    if (out_fd_ >= 0) close(out_fd_);
  }

  // Starts `exe` with argv {exe, args...} and this process's environment plus `env`.
  // Returns "" on success, else what failed.
  std::string spawn(const std::string& exe, const std::vector<std::string>& args,
                    const EnvOverrides& env) {
    char tmpl[] = "/tmp/hmc-test-peer-out-XXXXXX";
    out_fd_ = mkostemp(tmpl, O_CLOEXEC);
    if (out_fd_ < 0) return std::string("mkostemp: ") + strerror(errno);
    unlink(tmpl);

    std::vector<std::string> argv_s{exe};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s = child_environment(env);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd_, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd_, 2);
    // The peer must not hold our sockets: a dead peer's copies would keep our connections
    // open and hide the death we test for.
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    // Default signal dispositions and mask in the child whatever the test process changed.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return "posix_spawn " + exe + ": " + strerror(rc);
    pid_ = pid;
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));  // -1: fall back to polling
    return "";
  }

  pid_t pid() const { return pid_; }

  // True while the child runs; reaps it (keeping its status) once it has ended.
  bool running() {
    if (pid_ <= 0 || reaped_) return false;
    return !try_reap(0);
  }

  // Waits up to timeout_ms for the child to end; SIGKILLs it past that. Returns how it ended
  // with its output. Idempotent.
  ExitInfo wait(int timeout_ms) {
    if (pid_ > 0 && !reaped_ && !try_reap(timeout_ms)) {
      info_.timed_out = true;
      kill(pid_, SIGKILL);
      try_reap(-1);
    }
    info_.output = read_output();
    return info_;
  }

 private:
  // Waits up to timeout_ms (-1: forever) for the child; true once reaped.
  bool try_reap(int timeout_ms) {
    auto t0 = Clock::now();
    for (;;) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        info_.exited = WIFEXITED(status);
        info_.code = info_.exited ? WEXITSTATUS(status) : -1;
        info_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        return true;
      }
      if (r < 0 && errno != EINTR) {  // not our child any more: nothing to wait for
        reaped_ = true;
        return true;
      }
      int64_t left = timeout_ms < 0 ? 1000 : timeout_ms - ms_since(t0);
      if (left <= 0) return false;
      if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        poll(&p, 1, static_cast<int>(left));  // readable once the child has exited
      } else {
        // Kernels without pidfd_open: a short bounded poll interval.
        usleep(static_cast<useconds_t>(left < 5 ? left * 1000 : 5000));
      }
    }
  }

  std::string read_output() const {
    std::string out;
    if (out_fd_ < 0) return out;
    char buf[4096];
    off_t off = 0;
    for (;;) {
      ssize_t n = pread(out_fd_, buf, sizeof buf, off);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      off += n;
      if (out.size() > (1u << 20)) break;  // a runaway peer: the first MiB says enough
    }
    return out;
  }

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  ExitInfo info_;
};

// ---------------------------------------------------------------------------------------------
// RAII over hmc handles

class Context : NoCopy {
 public:
  ~Context() { reset(); }
  // Creates the context (progress thread on, the default, unless progress_thread is 0).
  hmc_status_t create(int progress_thread = 1) {
    hmc_context_options_t o{};
    o.struct_size = sizeof o;
    o.progress_thread = progress_thread;
    return hmc_context_create(&o, &ctx_);
  }
  hmc_status_t reset() {
    hmc_status_t st = HMC_SUCCESS;
    if (ctx_) st = hmc_context_destroy(ctx_);
    ctx_ = nullptr;
    return st;
  }
  hmc_context_t get() const { return ctx_; }
  explicit operator bool() const { return ctx_ != nullptr; }

 private:
  hmc_context_t ctx_ = nullptr;
};

// Creates `other` and connects it to ctx, both in this process: *ours is the peer accepted in
// ctx, *theirs the one connected in other. Empty string on success, else what failed.
inline std::string connect_in_process(hmc_context_t ctx, Context* other, int timeout_ms,
                                      hmc_peer_t* ours, hmc_peer_t* theirs) {
  hmc_status_t st = other->create();
  if (st != HMC_SUCCESS) return "hmc_context_create: " + describe(st);
  uint8_t addr[HMC_ADDRESS_MAX];
  size_t len = sizeof addr;
  st = hmc_address(ctx, addr, &len);
  if (st != HMC_SUCCESS) return "hmc_address: " + describe(st);
  hmc_status_t cst = HMC_ERR_INTERNAL;
  std::string cmsg;
  std::thread t([&] {
    cst = hmc_connect(other->get(), addr, len, timeout_ms, theirs);
    cmsg = hmc_last_error();
  });
  st = hmc_accept(ctx, timeout_ms, ours);
  std::string amsg = hmc_last_error();
  t.join();
  if (cst != HMC_SUCCESS) return "hmc_connect: " + cmsg;
  if (st != HMC_SUCCESS) return "hmc_accept: " + amsg;
  return "";
}

// Host memory from malloc or from hmc_mem_alloc(ctx, "host").
class HostBuffer {
 public:
  HostBuffer() = default;
  // malloc'd; data() is NULL when the allocation failed. A 0-byte buffer still has an address.
  explicit HostBuffer(size_t size)
      : p_(static_cast<uint8_t*>(malloc(size ? size : 1))), n_(p_ ? size : 0) {}
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(ctx_, o.ctx_);
    return *this;
  }
  ~HostBuffer() {
    if (!p_) return;
    if (ctx_)
      hmc_mem_free(ctx_, p_);
    else
      free(p_);
  }
  hmc_status_t alloc_hmc(hmc_context_t ctx, size_t size) {
    void* p = nullptr;
    hmc_status_t st = hmc_mem_alloc(ctx, "host", size, &p);
    if (st != HMC_SUCCESS) return st;
    *this = HostBuffer();
    p_ = static_cast<uint8_t*>(p);
    n_ = size;
    ctx_ = ctx;
    return st;
  }
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  explicit operator bool() const { return p_ != nullptr; }

  // Maps every page of the buffer now, in one call, instead of one fault per page when the
  // test or the transport first touches it: page faults cost ~20 us each on the virtual
  // machines this runs on (5 s for 1 GiB, where populating takes 0.3 s). Best effort: kernels
  // before 5.14 do not know MADV_POPULATE_WRITE, and the pages then fault in as before.
  void prefault() const {
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t begin = (reinterpret_cast<uintptr_t>(p_) + page - 1) & ~(page - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(p_) + n_) & ~(page - 1);
    if (p_ && end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateWrite);
  }

 private:
#ifdef MADV_POPULATE_WRITE
  static constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
  static constexpr int kPopulateWrite = 23;  // Linux 5.14
#endif
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
  hmc_context_t ctx_ = nullptr;  // set: free with hmc_mem_free
};

class Region : NoCopy {
 public:
  ~Region() { deregister(); }
  hmc_status_t register_mem(hmc_context_t ctx, void* addr, size_t size, uint32_t access) {
    return hmc_mem_register(ctx, addr, size, access, &r_);
  }
  hmc_status_t deregister() {
    hmc_status_t st = HMC_SUCCESS;
    if (r_) st = hmc_mem_deregister(r_);
    r_ = nullptr;
    return st;
  }
  // The packed descriptor, or an empty vector with *st set.
  std::vector<uint8_t> pack(hmc_status_t* st) const {
    std::vector<uint8_t> d(1024);
    size_t len = d.size();
    *st = hmc_region_pack(r_, d.data(), &len);
    if (*st == HMC_ERR_INVALID_ARGUMENT && len > d.size()) {
      d.resize(len);
      *st = hmc_region_pack(r_, d.data(), &len);
    }
    if (*st != HMC_SUCCESS) return {};
    d.resize(len);
    return d;
  }
  hmc_region_t get() const { return r_; }

 private:
  hmc_region_t r_ = nullptr;
};

class Remote : NoCopy {
 public:
  ~Remote() { release(); }
  hmc_status_t import(hmc_peer_t peer, const std::vector<uint8_t>& desc) {
    return hmc_remote_import(peer, desc.data(), desc.size(), &r_);
  }
  void release() {
    if (r_) hmc_remote_release(r_);
    r_ = nullptr;
  }
  hmc_remote_t get() const { return r_; }

 private:
  hmc_remote_t r_ = nullptr;
};

// Ends a request: waits up to timeout_ms; if it is still running then, cancels it and waits
// for it to end (so that its buffer may be freed) and reports HMC_ERR_TIMEOUT. On success
// *bytes gets the bytes moved.
inline hmc_status_t finish(hmc_request_t req, int timeout_ms, size_t* bytes = nullptr) {
  size_t n = 0;
  hmc_status_t st = hmc_request_wait(req, timeout_ms, &n);
  if (st == HMC_ERR_TIMEOUT || st == HMC_IN_PROGRESS) {
    std::string why = describe(st);
    hmc_request_cancel(req);
    hmc_status_t end = hmc_request_wait(req, 10000, nullptr);
    if (end == HMC_ERR_TIMEOUT || end == HMC_IN_PROGRESS) {
      // Still running after a cancel: its buffer can never be freed safely. Give up loudly.
      fprintf(stderr, "hmc test harness: a request ignored cancel for 10 s (%s); aborting\n",
              why.c_str());
      abort();
    }
    return HMC_ERR_TIMEOUT;
  }
  if (bytes) *bytes = n;
  return st;
}

// A set of in-flight requests. Whatever is still in flight when the set goes out of scope is
// cancelled and ended, so that buffers declared before the set outlive every request on them.
class Requests : NoCopy {
 public:
  struct Result {
    hmc_status_t status;
    size_t bytes;
    std::string error;  // describe(status) at the time it ended
  };
  ~Requests() {
    for (auto& r : reqs_)
      if (r) finish(r, 0);
  }
  // Posts through post_fn(&req), a call such as hmc_send(..., &req), and records the outcome:
  // a request to wait for later, or the failed post. Returns the index for wait().
  template <typename PostFn>
  size_t post(PostFn&& post_fn) {
    hmc_request_t req = nullptr;
    hmc_status_t st = post_fn(&req);
    reqs_.push_back(st == HMC_SUCCESS ? req : nullptr);
    results_.push_back({st, 0, st == HMC_SUCCESS ? "" : describe(st)});
    return reqs_.size() - 1;
  }
  // Ends request i (bounded by timeout_ms) and returns its outcome (the post's, if that failed).
  const Result& wait(size_t i, int timeout_ms) {
    if (reqs_[i]) {
      size_t n = 0;
      hmc_status_t st = finish(reqs_[i], timeout_ms, &n);
      reqs_[i] = nullptr;
      results_[i] = {st, n, st == HMC_SUCCESS ? "" : describe(st)};
    }
    return results_[i];
  }
  size_t size() const { return reqs_.size(); }

 private:
  std::vector<hmc_request_t> reqs_;
  std::vector<Result> results_;
};

// ---------------------------------------------------------------------------------------------
// Blocking helpers over a peer. Each returns the first failing status (post or wait); the
// message is in hmc_last_error() of the calling thread, or `*err` where given.

inline hmc_status_t send_wait(hmc_peer_t peer, const void* buf, size_t size, uint64_t tag,
                              int timeout_ms, std::string* err = nullptr) {
  hmc_request_t req = nullptr;
  hmc_status_t st = hmc_send(peer, buf, size, tag, &req);
  if (st == HMC_SUCCESS) st = finish(req, timeout_ms);
  if (st != HMC_SUCCESS && err) *err = "send: " + describe(st);
  return st;
}

inline hmc_status_t recv_wait(hmc_peer_t peer, void* buf, size_t size, uint64_t tag, int timeout_ms,
                              size_t* got, std::string* err = nullptr) {
  hmc_request_t req = nullptr;
  hmc_status_t st = hmc_recv(peer, buf, size, tag, &req);
  if (st == HMC_SUCCESS) st = finish(req, timeout_ms, got);
  if (st != HMC_SUCCESS && err) *err = "recv: " + describe(st);
  return st;
}

// One 64-bit control value (the scenarios' handshakes).
inline hmc_status_t send_u64(hmc_peer_t peer, uint64_t tag, uint64_t v, int timeout_ms,
                             std::string* err = nullptr) {
  return send_wait(peer, &v, sizeof v, tag, timeout_ms, err);
}

inline hmc_status_t recv_u64(hmc_peer_t peer, uint64_t tag, uint64_t* v, int timeout_ms,
                             std::string* err = nullptr) {
  size_t got = 0;
  hmc_status_t st = recv_wait(peer, v, sizeof *v, tag, timeout_ms, &got, err);
  if (st == HMC_SUCCESS && got != sizeof *v) {
    if (err) *err = "recv: control value of " + std::to_string(got) + " bytes, expected 8";
    return HMC_ERR_PROTOCOL;
  }
  return st;
}

// A variable-size blob (a region descriptor) of at most 4 KiB.
inline hmc_status_t recv_blob(hmc_peer_t peer, uint64_t tag, std::vector<uint8_t>* blob,
                              int timeout_ms, std::string* err = nullptr) {
  blob->assign(4096, 0);
  size_t got = 0;
  hmc_status_t st = recv_wait(peer, blob->data(), blob->size(), tag, timeout_ms, &got, err);
  blob->resize(st == HMC_SUCCESS ? got : 0);
  return st;
}

}  // namespace hmc_test

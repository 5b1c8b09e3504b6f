// Two processes moving device memory to each other through hmc: the helpers shared by the
// staging tests on emulated runtimes (staged_transfer_test.cpp, target_staging_test.cpp) and on
// real GPUs (real_gpu_transfer_test.cpp).
//
// Each test forks its peer before any context exists. The peer echoes every message back, so
// both directions are covered: parent -> child (parent's memory to the child's) and back.
// Device memory is checked by copying it back to host memory with hmc_mem_copy.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace staging_test {

// Set by tests on real GPUs: sides use the vendors' installed runtimes, not the emulations of
// FAKEGPU_DIR.
inline bool g_real_runtimes = false;

inline constexpr size_t kChunk = 256 * 1024;  // small, so that modest sizes cross many pieces
// The size of a framed message's first piece (the core's kFirstPiece): messages of exactly this
// size, of a chunk or more, and device IPC messages (larger than this) are sent as pieces.
inline constexpr size_t kFirst = 64 * 1024 + 1;
inline constexpr int kTimeoutMs = 20000;

struct Vendor {
  const char* name;
  const char* env;
  const char* lib;  // relative to FAKEGPU_DIR
};
inline const Vendor kVendors[] = {
    {"cuda", "HMC_CUDA_LIBRARY", "cuda/libcuda.so.1"},
    {"hip", "HMC_HIP_LIBRARY", "hip6/libamdhip64.so.6"},
    {"mlu", "HMC_MLU_LIBRARY", "mlu/libcnrt.so"},
    {"musa", "HMC_MUSA_LIBRARY", "musa/libmusart.so"},
};

// The environment of one side: only the plugin of its own memory's vendor (none for host).
inline void set_side_env(const std::string& mem, const std::string& path) {
  setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
  setenv("HMC_PATH", path.c_str(), 1);
  setenv("HMC_NET_PLUGINS", "hoststage", 1);  // the paths tested; other plugins only cost start-up
  setenv("HMC_HOSTSTAGE_SHM", path == "hoststage/tcp" ? "0" : "1", 1);
  setenv("HMC_STAGE_CHUNK", std::to_string(kChunk).c_str(), 1);
  setenv("HMC_LOG_LEVEL", getenv("STAGED_TEST_LOG") ? getenv("STAGED_TEST_LOG") : "warn", 1);
  // The emulated copies are memmoves of one speed in every direction, so measured copy figures
  // would differ only by this machine's noise and make the choice between device IPC and shared
  // bounces a coin toss. The tests here check which way messages went: they run on the default
  // figures (a tie, won by device IPC). The measured choice has its own test, which turns the
  // measurement back on.
  setenv("HMC_DEVICE_COPY_CALIBRATE", "0", 1);
  unsetenv("HMC_AUTH_TOKEN");
  std::string vendor = mem.substr(0, mem.find(':'));
  std::string plugins = "^cuda,^hip,^mlu,^musa";
  for (const auto& v : kVendors) {
    if (vendor == v.name) {
      plugins = v.name;
      if (g_real_runtimes)
        unsetenv(v.env);  // the vendor's installed runtime
      else
        setenv(v.env, (std::string(FAKEGPU_DIR) + "/" + v.lib).c_str(), 1);
    } else {
      unsetenv(v.env);  // (an excluded plugin's variable would be warned about as unknown)
    }
  }
  setenv("HMC_DEVICE_PLUGINS", plugins.c_str(), 1);
}

inline std::string vendor_of(const std::string& mem) {
  return mem.substr(0, mem.find(':'));
}

inline uint8_t pattern(size_t i, size_t size, int round) {
  return static_cast<uint8_t>(i * 131 + size * 7 + round * 29 + 3);
}

// Fills device (or host) memory with the pattern, through a host buffer.
inline bool fill(hmc_context_t ctx, void* mem, size_t size, int round) {
  std::vector<uint8_t> host(size);
  for (size_t i = 0; i < size; ++i) host[i] = pattern(i, size, round);
  return size == 0 || hmc_mem_copy(ctx, mem, host.data(), size) == HMC_SUCCESS;
}

// Index of the first byte that differs from the pattern, or -1.
inline long check(hmc_context_t ctx, const void* mem, size_t size, int round) {
  std::vector<uint8_t> host(size);
  if (size && hmc_mem_copy(ctx, host.data(), mem, size) != HMC_SUCCESS) return -2;
  for (size_t i = 0; i < size; ++i)
    if (host[i] != pattern(i, size, round)) return static_cast<long>(i);
  return -1;
}

inline hmc_status_t send_wait(hmc_peer_t peer, const void* buf, size_t size, uint64_t tag) {
  hmc_request_t r;
  hmc_status_t st = hmc_send(peer, buf, size, tag, &r);
  return st == HMC_SUCCESS ? hmc_request_wait(r, kTimeoutMs, nullptr) : st;
}

inline hmc_status_t recv_wait(hmc_peer_t peer, void* buf, size_t size, uint64_t tag, size_t* got) {
  hmc_request_t r;
  hmc_status_t st = hmc_recv(peer, buf, size, tag, &r);
  return st == HMC_SUCCESS ? hmc_request_wait(r, kTimeoutMs, got) : st;
}

// The forked peer: connects, then echoes `sizes.size()` messages (tag = index) from a buffer in
// its memory. Exit status: 0 fine, 10+ which step failed.
[[noreturn]] inline void child_main(int addr_fd, const std::string& mem, const std::string& path,
                                    const std::vector<size_t>& sizes) {
  set_side_env(mem, path);
  hmc_context_t ctx;
  if (hmc_context_create(nullptr, &ctx) != HMC_SUCCESS) _exit(10);
  uint8_t addr[HMC_ADDRESS_MAX];
  ssize_t n = read(addr_fd, addr, sizeof addr);
  if (n <= 0) _exit(11);
  hmc_peer_t peer;
  if (hmc_connect(ctx, addr, static_cast<size_t>(n), kTimeoutMs, &peer) != HMC_SUCCESS) _exit(12);
  size_t max = 1;
  for (size_t s : sizes) max = std::max(max, s);
  void* buf;
  if (hmc_mem_alloc(ctx, mem.c_str(), max, &buf) != HMC_SUCCESS) _exit(13);
  for (size_t i = 0; i < sizes.size(); ++i) {
    size_t got = 0;
    if (recv_wait(peer, buf, max, i, &got) != HMC_SUCCESS) {
      fprintf(stderr, "child: recv %zu: %s\n", i, hmc_last_error());
      _exit(14);
    }
    if (got != sizes[i]) _exit(15);
    if (check(ctx, buf, got, int(i)) != -1) _exit(16);
    if (send_wait(peer, buf, got, i) != HMC_SUCCESS) {
      fprintf(stderr, "child: send %zu: %s\n", i, hmc_last_error());
      _exit(17);
    }
  }
  hmc_mem_free(ctx, buf);
  hmc_context_destroy(ctx);
  _exit(0);
}

struct Pair {
  const char* mine;
  const char* theirs;
  const char* path;
};

inline void PrintTo(const Pair& p, std::ostream* os) {
  *os << p.mine << " <-> " << p.theirs << " over " << p.path;
}

// Makes a pipe and forks: the child (*pid 0) keeps the read end fds[0], the parent (*pid the
// child's) the write end fds[1]; each closes the other end.
inline void fork_with_pipe(int fds[2], pid_t* pid) {
  ASSERT_EQ(pipe(fds), 0);
  *pid = fork();
  ASSERT_GE(*pid, 0);
  close(*pid == 0 ? fds[1] : fds[0]);
}

// Sends each size to the forked peer (memory p.theirs) and checks what it echoes back.
inline void echo_sizes(const Pair& p, const std::vector<size_t>& sizes) {
  int fds[2];
  pid_t pid = -1;
  ASSERT_NO_FATAL_FAILURE(fork_with_pipe(fds, &pid));
  if (pid == 0) child_main(fds[0], p.theirs, p.path, sizes);
  struct Reaper {
    pid_t pid;
    int status = -1;
    ~Reaper() {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
    }
  } reaper{pid};

  set_side_env(p.mine, p.path);
  hmc_context_t ctx;
  ASSERT_EQ(hmc_context_create(nullptr, &ctx), HMC_SUCCESS) << hmc_last_error();
  uint8_t addr[HMC_ADDRESS_MAX];
  size_t len = sizeof addr;
  ASSERT_EQ(hmc_address(ctx, addr, &len), HMC_SUCCESS);
  ASSERT_EQ(write(fds[1], addr, len), static_cast<ssize_t>(len));
  close(fds[1]);
  hmc_peer_t peer;
  ASSERT_EQ(hmc_accept(ctx, kTimeoutMs, &peer), HMC_SUCCESS) << hmc_last_error();
  hmc_peer_info_t info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(hmc_peer_info(peer, &info), HMC_SUCCESS);
  EXPECT_STREQ(info.path, p.path);

  size_t max = *std::max_element(sizes.begin(), sizes.end());
  void *out, *back;
  ASSERT_EQ(hmc_mem_alloc(ctx, p.mine, max, &out), HMC_SUCCESS) << hmc_last_error();
  ASSERT_EQ(hmc_mem_alloc(ctx, p.mine, max, &back), HMC_SUCCESS) << hmc_last_error();
  for (size_t i = 0; i < sizes.size(); ++i) {
    size_t size = sizes[i];
    SCOPED_TRACE("message " + std::to_string(i) + " of " + std::to_string(size) + " bytes");
    ASSERT_TRUE(fill(ctx, out, size, int(i))) << hmc_last_error();
    ASSERT_EQ(send_wait(peer, out, size, i), HMC_SUCCESS) << hmc_last_error();
    size_t got = 0;
    ASSERT_EQ(recv_wait(peer, back, max, i, &got), HMC_SUCCESS) << hmc_last_error();
    ASSERT_EQ(got, size);
    ASSERT_EQ(check(ctx, back, size, int(i)), -1);
  }
  // Same vendor on both sides (two processes, one host): messages larger than the first piece
  // went by device IPC, both ways; otherwise none did.
  std::string mine = vendor_of(p.mine), theirs = vendor_of(p.theirs);
  const char* ipc_env = getenv("HMC_DEVICE_IPC");
  bool ipc = mine == theirs && mine != "host" && !(ipc_env && std::string(ipc_env) == "0");
  size_t big = static_cast<size_t>(
      std::count_if(sizes.begin(), sizes.end(), [](size_t s) { return s > kFirst; }));
  ASSERT_EQ(hmc_peer_info(peer, &info), HMC_SUCCESS);
  EXPECT_STREQ(info.device_ipc, ipc ? mine.c_str() : "");
  EXPECT_EQ(info.ipc_messages, ipc ? 2 * big : 0u);
  // Device memory on both sides and no IPC: messages larger than the first piece are read out
  // of the sender's staging buffers (shared bounces), unless HMC_STAGE_SHARED=0.
  const char* shared_env = getenv("HMC_STAGE_SHARED");
  bool shared =
      mine != "host" && theirs != "host" && !(shared_env && std::string(shared_env) == "0");
  size_t pieces = static_cast<size_t>(
      std::count_if(sizes.begin(), sizes.end(), [&](size_t s) { return s > kFirst && !ipc; }));
  EXPECT_EQ(info.shared_staged_messages, shared ? 2 * pieces : 0u);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  reaper.pid = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer exit status " << status;
  hmc_mem_free(ctx, out);
  hmc_mem_free(ctx, back);
  hmc_context_destroy(ctx);
}

inline std::string pair_name(const testing::TestParamInfo<Pair>& info) {
  std::string n = std::string(info.param.mine) + "_" + info.param.theirs + "_" + info.param.path;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// The emulated runtimes read FAKEGPU_ settings when first loaded; a process that had them
// loaded already (an earlier test) re-reads them here.
inline void reset_fakes() {
  void* lib = dlopen(FAKEGPU_DIR "/libfakegpu.so", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return;
  if (auto reset = reinterpret_cast<void (*)()>(dlsym(lib, "fakegpu_reset"))) reset();
  dlclose(lib);
}

using EnvList = std::vector<std::pair<const char*, const char*>>;
// A role run in either process: returns "" when every check held, else what failed.
using Role = std::function<std::string(hmc_context_t, hmc_peer_t, const char* mem)>;

// Runs `child` in a forked process (memory child_mem, connecting) and `parent` here (memory
// parent_mem, accepting). The child's verdict comes back through its exit status; with
// child_killed the child is expected to die by SIGKILL.
inline void run_roles(const char* path, const char* parent_mem, const char* child_mem,
                      const Role& child, const Role& parent, const EnvList& child_env = {},
                      bool child_killed = false) {
  int fds[2];
  pid_t pid = -1;
  ASSERT_NO_FATAL_FAILURE(fork_with_pipe(fds, &pid));
  if (pid == 0) {
    set_side_env(child_mem, path);
    for (const auto& [k, v] : child_env) setenv(k, v, 1);
    reset_fakes();
    hmc_context_t ctx;
    if (hmc_context_create(nullptr, &ctx) != HMC_SUCCESS) _exit(10);
    uint8_t addr[HMC_ADDRESS_MAX];
    ssize_t n = read(fds[0], addr, sizeof addr);
    hmc_peer_t peer;
    if (n <= 0 || hmc_connect(ctx, addr, static_cast<size_t>(n), kTimeoutMs, &peer) != HMC_SUCCESS)
      _exit(11);
    std::string err = child(ctx, peer, child_mem);
    if (!err.empty()) fprintf(stderr, "child (%s): %s\n", child_mem, err.c_str());
    hmc_context_destroy(ctx);
    _exit(err.empty() ? 0 : 1);
  }
  set_side_env(parent_mem, path);
  reset_fakes();
  hmc_context_t ctx;
  hmc_status_t st = hmc_context_create(nullptr, &ctx);
  if (st != HMC_SUCCESS) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    FAIL() << hmc_last_error();
  }
  uint8_t addr[HMC_ADDRESS_MAX];
  size_t len = sizeof addr;
  hmc_address(ctx, addr, &len);
  EXPECT_EQ(write(fds[1], addr, len), static_cast<ssize_t>(len));
  close(fds[1]);
  hmc_peer_t peer = nullptr;
  if (hmc_accept(ctx, kTimeoutMs, &peer) == HMC_SUCCESS)
    EXPECT_EQ(parent(ctx, peer, parent_mem), "");
  else
    ADD_FAILURE() << hmc_last_error();
  int status = 0;
  for (int waited = 0; waitpid(pid, &status, WNOHANG) == 0; waited += 5) {
    if (waited > kTimeoutMs) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "the peer process hung";
      break;
    }
    usleep(5000);
  }
  if (child_killed)
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "peer status " << status;
  else
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "peer exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  hmc_context_destroy(ctx);
}

// ---- checks inside a role: each returns what failed ("" when it held), for the role to return

#define CHECK_OK(call)                                                           \
  do {                                                                           \
    hmc_status_t st_ = (call);                                                   \
    if (st_ != HMC_SUCCESS) return std::string(#call) + ": " + hmc_last_error(); \
  } while (0)
#define CHECK_TRUE(cond, what)             \
  do {                                     \
    if (!(cond)) return std::string(what); \
  } while (0)
#define STEP(expr)              \
  do {                          \
    std::string e_ = (expr);    \
    if (!e_.empty()) return e_; \
  } while (0)

// A one-byte step message on tag (host memory both sides).
inline std::string step_send(hmc_peer_t peer, uint64_t tag, uint8_t v = 1) {
  CHECK_OK(send_wait(peer, &v, 1, tag));
  return "";
}
inline std::string step_recv(hmc_peer_t peer, uint64_t tag, uint8_t* v = nullptr) {
  uint8_t b = 0;
  size_t got = 0;
  CHECK_OK(recv_wait(peer, &b, 1, tag, &got));
  if (v) *v = b;
  return "";
}

// Registers `size` bytes at `mem` (memory of any kind) and sends its descriptor on tag.
inline std::string export_memory(hmc_context_t ctx, hmc_peer_t peer, void* mem, size_t size,
                                 uint32_t access, hmc_region_t* reg, uint64_t tag) {
  CHECK_OK(hmc_mem_register(ctx, mem, size, access, reg));
  uint8_t desc[512];
  size_t len = sizeof desc;
  CHECK_OK(hmc_region_pack(*reg, desc, &len));
  CHECK_OK(send_wait(peer, desc, len, tag));
  return "";
}

// Receives a region descriptor on tag and imports it.
inline std::string import_region(hmc_peer_t peer, hmc_remote_t* remote, uint64_t tag = 7) {
  uint8_t desc[512];
  size_t len = 0;
  CHECK_OK(recv_wait(peer, desc, sizeof desc, tag, &len));
  CHECK_OK(hmc_remote_import(peer, desc, len, remote));
  return "";
}

// The host-only paths that every scenario of the staging tests runs over, and their names in
// the parameterised tests' names ("tcp", "shm").
inline const char* const kHostPaths[] = {"hoststage/tcp", "hoststage/shm"};
inline std::string path_name(const testing::TestParamInfo<const char*>& info) {
  std::string p = info.param;
  return p.substr(p.find('/') + 1);
}

}  // namespace staging_test

// put_notify: one process writes into memory another registered, and tells it so, through the
// C++ wrapper (hmc.hpp).
//
//   put_notify [DEVICE]    where the target's region lives: "host" (default), "cuda:0", ...
//
// The parent forks the target. The target registers a region for remote writes and hands the
// parent its address blob and the region's packed descriptor through a pipe. The parent
// connects, imports the descriptor and puts a message with a notification; the target waits
// for the notification, which arrives once the data is in place, and reads the region.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <hmc/hmc.hpp>
#include <string>
#include <vector>

namespace {

constexpr size_t kSize = 64;
constexpr uint64_t kNotifyValue = 7;

// A blob through the pipe: its length, then its bytes.
bool write_blob(int fd, const std::vector<uint8_t>& blob) {
  uint32_t n = static_cast<uint32_t>(blob.size());
  return write(fd, &n, sizeof n) == sizeof n &&
         write(fd, blob.data(), n) == static_cast<ssize_t>(n);
}
bool read_blob(int fd, std::vector<uint8_t>* blob) {
  uint32_t n = 0;
  if (read(fd, &n, sizeof n) != sizeof n) return false;
  blob->resize(n);
  return read(fd, blob->data(), n) == static_cast<ssize_t>(n);
}

int target(const std::string& device, int out) {
  hmc::Context ctx;  // first: everything below must go before it
  hmc::Memory mem = ctx.alloc(device, kSize);
  hmc::Region region = ctx.register_memory(mem.data(), kSize, HMC_ACCESS_REMOTE_WRITE);
  if (!write_blob(out, ctx.address()) || !write_blob(out, region.pack())) return 1;
  hmc::Peer peer = ctx.accept(10000);
  hmc_notification_t note = ctx.notify_wait(10000);
  char text[kSize];
  ctx.copy(text, mem.data(), kSize);  // the region may be device memory
  std::printf("notified (value %llu): %s\n", static_cast<unsigned long long>(note.value), text);
  return note.value == kNotifyValue ? 0 : 1;
}

int initiator(int in, pid_t target_pid) {
  std::vector<uint8_t> address, descriptor;
  if (!read_blob(in, &address) || !read_blob(in, &descriptor)) return 1;
  hmc::Context ctx;
  hmc::Peer peer = ctx.connect(address, 10000);
  hmc::Remote remote = peer.import_remote(descriptor);
  char text[kSize] = "written by hmc_put";
  peer.put(text, kSize, remote, 0, HMC_PUT_NOTIFY, kNotifyValue).wait(10000);
  int status = 1;
  waitpid(target_pid, &status, 0);  // the target's exit says it saw the data
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = argc > 1 ? argv[1] : "host";
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t pid = fork();
  if (pid < 0) return 1;
  try {
    if (pid == 0) {
      close(fds[0]);
      return target(device, fds[1]);
    }
    close(fds[1]);
    return initiator(fds[0], pid);
  } catch (const hmc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());  // "<call>: <status>: <what went wrong>"
    return 1;
  }
}

/* hello_send: one process sends a message to another through hmc.
 *
 *   hello_send [DEVICE]    where both buffers live: "host" (default), "cuda:0", "hip:1", ...
 *
 * The parent forks a receiver, which creates a context and hands its address blob to the
 * parent through a pipe (an application hands it over by any means: a key-value store, a file,
 * its launcher). The parent connects and sends; hmc chooses the path and moves device memory
 * however that path allows. On an error the process prints hmc's message and exits. */
#include <hmc/hmc.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    hmc_status_t st_ = (call);                                                          \
    if (st_ != HMC_SUCCESS) {                                                           \
      fprintf(stderr, "%s: %s: %s\n", #call, hmc_status_string(st_), hmc_last_error()); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

enum { TAG = 42, SIZE = 64, TIMEOUT_MS = 10000 };

static int receive(const char* device, int addr_out) {
  hmc_context_t ctx;
  hmc_peer_t peer;
  hmc_request_t req;
  char addr[HMC_ADDRESS_MAX], text[SIZE];
  size_t len = sizeof addr, got = 0;
  void* buf;
  CHECK(hmc_context_create(NULL, &ctx));
  CHECK(hmc_address(ctx, addr, &len));
  if (write(addr_out, addr, len) != (ssize_t)len) return 1;
  CHECK(hmc_accept(ctx, TIMEOUT_MS, &peer));
  CHECK(hmc_mem_alloc(ctx, device, SIZE, &buf));
  CHECK(hmc_recv(peer, buf, SIZE, TAG, &req));
  CHECK(hmc_request_wait(req, TIMEOUT_MS, &got));
  CHECK(hmc_mem_copy(ctx, text, buf, SIZE)); /* the CPU may not read device memory */
  printf("received %zu bytes: %s\n", got, text);
  CHECK(hmc_mem_free(ctx, buf));
  CHECK(hmc_context_destroy(ctx)); /* closes the peer too */
  return 0;
}

static int send_hello(const char* device, int addr_in, pid_t receiver) {
  hmc_context_t ctx;
  hmc_peer_t peer;
  hmc_peer_info_t info = {.struct_size = sizeof info};
  hmc_request_t req;
  char addr[HMC_ADDRESS_MAX], text[SIZE] = "hello from hmc";
  ssize_t len = read(addr_in, addr, sizeof addr);
  void* buf;
  int status = 1;
  if (len <= 0) return 1; /* the receiver failed before it could say where it is */
  CHECK(hmc_context_create(NULL, &ctx));
  CHECK(hmc_connect(ctx, addr, (size_t)len, TIMEOUT_MS, &peer));
  CHECK(hmc_peer_info(peer, &info));
  printf("path: %s (%s)\n", info.path, info.path_reason);
  CHECK(hmc_mem_alloc(ctx, device, SIZE, &buf));
  CHECK(hmc_mem_copy(ctx, buf, text, SIZE));
  CHECK(hmc_send(peer, buf, SIZE, TAG, &req));
  CHECK(hmc_request_wait(req, TIMEOUT_MS, NULL));
  /* A send may end once its bytes are on their way: the receiver's exit says they arrived. */
  waitpid(receiver, &status, 0);
  CHECK(hmc_mem_free(ctx, buf));
  CHECK(hmc_context_destroy(ctx));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "host";
  int fds[2];
  pid_t pid;
  if (pipe(fds) != 0 || (pid = fork()) < 0) return 1;
  if (pid == 0) {
    close(fds[0]);
    return receive(device, fds[1]);
  }
  close(fds[1]);
  return send_hello(device, fds[0], pid);
}

/* An application built against an installed hmc (tests/install/app_out_of_tree.sh): what an
 * hmc-info user sees first, then a message between two processes over loopback.
 *
 *   hmc_app PLUGIN_DIR    PLUGIN_DIR: where the build system says the installed plugins are
 *
 * Prints "version V", "plugin NAME at PATH" for every plugin that loaded (each must lie in
 * PLUGIN_DIR), "device NAME" for every device, and "received N bytes: TEXT"; exit status 1 on
 * any failure, with hmc's message. */
#include <hmc/hmc.h>
#include <stdio.h>
#include <string.h>
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

enum { TAG = 7, SIZE = 32, TIMEOUT_MS = 10000 };

static int inventory(const char* plugin_dir) {
  hmc_context_t ctx;
  int plugins = 0, devices = 0, loaded = 0;
  size_t dir_len = strlen(plugin_dir);
  CHECK(hmc_context_create(NULL, &ctx));
  CHECK(hmc_plugin_count(ctx, &plugins));
  for (int i = 0; i < plugins; ++i) {
    hmc_plugin_info_t p = {.struct_size = sizeof p};
    CHECK(hmc_plugin_info(ctx, i, &p));
    if (!p.loaded) continue;
    ++loaded;
    printf("plugin %s at %s\n", p.name, p.path);
    if (strncmp(p.path, plugin_dir, dir_len) != 0 || p.path[dir_len] != '/') {
      fprintf(stderr, "plugin %s was loaded from %s, not from the package's plugin dir %s\n",
              p.name, p.path, plugin_dir);
      return 1;
    }
  }
  CHECK(hmc_device_count(ctx, &devices));
  for (int i = 0; i < devices; ++i) {
    hmc_device_info_t d = {.struct_size = sizeof d};
    CHECK(hmc_device_info(ctx, i, &d));
    printf("device %s\n", d.name);
  }
  CHECK(hmc_context_destroy(ctx));
  if (loaded == 0) {
    fprintf(stderr, "no plugin loaded from %s\n", plugin_dir);
    return 1;
  }
  return 0;
}

static int receive(int addr_out) {
  hmc_context_t ctx;
  hmc_peer_t peer;
  hmc_request_t req;
  char addr[HMC_ADDRESS_MAX], text[SIZE] = {0};
  size_t len = sizeof addr, got = 0;
  CHECK(hmc_context_create(NULL, &ctx));
  CHECK(hmc_address(ctx, addr, &len));
  if (write(addr_out, addr, len) != (ssize_t)len) return 1;
  CHECK(hmc_accept(ctx, TIMEOUT_MS, &peer));
  CHECK(hmc_recv(peer, text, SIZE, TAG, &req));
  CHECK(hmc_request_wait(req, TIMEOUT_MS, &got));
  printf("received %zu bytes: %s\n", got, text);
  fflush(stdout);
  CHECK(hmc_context_destroy(ctx));
  return 0;
}

static int send_text(int addr_in, pid_t receiver) {
  hmc_context_t ctx;
  hmc_peer_t peer;
  hmc_request_t req;
  char addr[HMC_ADDRESS_MAX], text[SIZE] = "from an installed hmc";
  ssize_t len = read(addr_in, addr, sizeof addr);
  int status = 1;
  if (len <= 0) return 1;
  CHECK(hmc_context_create(NULL, &ctx));
  CHECK(hmc_connect(ctx, addr, (size_t)len, TIMEOUT_MS, &peer));
  CHECK(hmc_send(peer, text, SIZE, TAG, &req));
  CHECK(hmc_request_wait(req, TIMEOUT_MS, NULL));
  waitpid(receiver, &status, 0);
  CHECK(hmc_context_destroy(ctx));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int fds[2];
  pid_t pid;
  if (argc != 2) {
    fprintf(stderr, "usage: hmc_app PLUGIN_DIR\n");
    return 2;
  }
  printf("version %s\n", hmc_version());
  if (inventory(argv[1]) != 0) return 1;
  fflush(stdout);
  if (pipe(fds) != 0 || (pid = fork()) < 0) return 1;
  if (pid == 0) {
    close(fds[0]);
    return receive(fds[1]);
  }
  close(fds[1]);
  return send_text(fds[0], pid);
}

#include "ranks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loopback_port.h"

namespace coll_bench {

int run_ranks(const char* tool, int np, const std::function<int()>& rank_main) {
  if (np == 0) return rank_main();
  std::string rdv = "tcp://127.0.0.1:" + std::to_string(hmc_tools::free_loopback_port());
  std::vector<pid_t> pids;
  fflush(stdout);
  for (int r = 0; r < np; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "%s: fork: %s\n", tool, strerror(errno));
      break;
    }
    if (pid == 0) {
      setenv("HMC_RANK", std::to_string(r).c_str(), 1);
      setenv("HMC_WORLD_SIZE", std::to_string(np).c_str(), 1);
      setenv("HMC_RENDEZVOUS", rdv.c_str(), 1);
      int rc = rank_main();
      fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int rc = int(pids.size()) == np ? 0 : 1;
  for (pid_t p : pids) {
    int status = 0;
    while (waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

Session::~Session() {
  if (comm) hmc_comm_destroy(comm);
  if (ctx) hmc_context_destroy(ctx);
}

bool Session::open(const char* tool) {
  hmc_status_t st = hmc_context_create(nullptr, &ctx);
  if (st != HMC_SUCCESS) {
    fprintf(stderr, "%s: hmc_context_create: %s: %s\n", tool, hmc_status_string(st),
            hmc_last_error());
    return false;
  }
  if ((st = hmc_comm_create(ctx, nullptr, &comm)) != HMC_SUCCESS) {
    fprintf(stderr, "%s: hmc_comm_create: %s: %s\n", tool, hmc_status_string(st), hmc_last_error());
    return false;
  }
  hmc_comm_rank(comm, &rank);
  hmc_comm_size(comm, &size);
  return true;
}

}  // namespace coll_bench

// One rank of the cross-host tests (netns_test.sh, netns_hier_test.sh): rank, size and
// rendezvous from HMC_RANK, HMC_WORLD_SIZE and HMC_RENDEZVOUS. It runs every collective over
// host memory (or NETNS_MEM's), checked exactly (coll_roles.h), then checks what hmc made of the
// hosts: each rank's host as the communicator numbers them (NETNS_HOSTS, e.g. "0,0,1,1"), and
// the path between this rank and every other, shared memory within a host and TCP across, and
// (NETNS_BACKEND) the backend its metrics give the all-reduces. Exit status 0 when all held;
// otherwise what failed is on stderr.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "coll_roles.h"
#include "hmc/hmc.h"

using namespace coll_roles;

namespace {

std::vector<int> parse_hosts(const char* text) {
  std::vector<int> hosts;
  for (const char* p = text; p && *p;) {
    hosts.push_back(atoi(p));
    p = strchr(p, ',');
    if (p) ++p;
  }
  return hosts;
}

// Every pair connects once more, as an application would (lower rank to higher), and the path
// each pair got is checked against the hosts: the connection a communicator makes for a pair is
// chosen by the same rules from the same records.
std::string check_paths(Rank& r, const std::vector<int>& hosts) {
  std::vector<uint8_t> mine(HMC_ADDRESS_MAX, 0), all(size_t(r.size) * HMC_ADDRESS_MAX);
  size_t len = mine.size();
  if (hmc_address(r.ctx, mine.data(), &len) != HMC_SUCCESS)
    return "address: " + describe(HMC_ERR_INTERNAL);
  int32_t pid = int32_t(getpid());
  std::vector<int32_t> pids(size_t(r.size));
  hmc_request_t req;
  std::string e =
      wait(hmc_all_gather(r.comm, mine.data(), all.data(), HMC_ADDRESS_MAX, HMC_DTYPE_U8, &req),
           &req, "all_gather of addresses");
  if (e.empty())
    e = wait(hmc_all_gather(r.comm, &pid, pids.data(), 1, HMC_DTYPE_I32, &req), &req,
             "all_gather of pids");
  if (!e.empty()) return e;
  std::vector<hmc_peer_t> peers;
  std::thread acceptor([&] {
    for (int k = 0; k < r.rank; ++k) {
      hmc_peer_t p = nullptr;
      if (hmc_accept(r.ctx, 15000, &p) == HMC_SUCCESS) peers.push_back(p);
    }
  });
  std::vector<hmc_peer_t> dialled;
  for (int k = r.rank + 1; k < r.size && e.empty(); ++k) {
    hmc_peer_t p = nullptr;
    if (hmc_connect(r.ctx, all.data() + size_t(k) * HMC_ADDRESS_MAX, HMC_ADDRESS_MAX, 15000, &p) !=
        HMC_SUCCESS) {
      e = "connect to rank " + std::to_string(k) + ": " + hmc_last_error();
      break;
    }
    dialled.push_back(p);
    hmc_peer_info_t info{};
    info.struct_size = sizeof info;
    hmc_peer_info(p, &info);
    bool same = hosts[size_t(k)] == hosts[size_t(r.rank)];
    const char* want = same ? "hoststage/shm" : "hoststage/tcp";
    printf("rank %d -> rank %d (%s host): %s, %s, remote %s\n", r.rank, k, same ? "same" : "other",
           info.path, info.path_reason, info.remote_address);
    if (std::string(info.path) != want || info.same_host != (same ? 1 : 0) ||
        info.remote_pid != pids[size_t(k)])
      e = "rank " + std::to_string(r.rank) + " -> rank " + std::to_string(k) + ": path " +
          info.path + " (same_host " + std::to_string(info.same_host) + "), expected " + want;
  }
  acceptor.join();
  // Nobody closes a peer before every pair was checked.
  std::string b = wait(hmc_barrier(r.comm, &req), &req, "barrier after the paths");
  for (auto p : peers) hmc_peer_close(p);
  for (auto p : dialled) hmc_peer_close(p);
  if (e.empty() && int(peers.size()) != r.rank)
    e = "accepted " + std::to_string(peers.size()) + " of " + std::to_string(r.rank) + " peers";
  return e.empty() ? b : e;
}

}  // namespace

// NETNS_BACKEND: how the collectives ran ("hmc", "hierarchical"), as the metrics label them:
// the context's text must count completed all-reduces of this communicator under that backend.
std::string check_metrics(Rank& r, const char* backend) {
  size_t len = 0;
  if (hmc_metrics_dump(r.ctx, nullptr, &len) != HMC_SUCCESS) return "metrics: size";
  std::string text(len + 4096, '\0');
  len = text.size();
  if (hmc_metrics_dump(r.ctx, text.data(), &len) != HMC_SUCCESS) return "metrics: dump";
  text.resize(len ? len - 1 : 0);
  std::regex line(std::string("hmc_collectives_total\\{comm=\"[0-9a-f]{16}\",collective=\"all_"
                              "reduce\",backend=\"") +
                  backend + "\",stage=\"completed\"\\} [1-9][0-9]*\n");
  if (!std::regex_search(text, line))
    return std::string("the metrics count no completed all_reduce with backend ") + backend;
  return "";
}

int main() {
  std::vector<int> hosts = parse_hosts(getenv("NETNS_HOSTS"));
  hmc_context_t ctx;
  if (hmc_context_create(nullptr, &ctx) != HMC_SUCCESS) {
    fprintf(stderr, "context: %s\n", hmc_last_error());
    return 1;
  }
  hmc_comm_t comm = nullptr;
  hmc_status_t st = hmc_comm_create(ctx, nullptr, &comm);
  if (st != HMC_SUCCESS) {
    fprintf(stderr, "create: %s\n", describe(st).c_str());
    return 1;
  }
  // NETNS_MEM: the memory its buffers are in ("cuda:0"; default host memory).
  const char* mem = getenv("NETNS_MEM");
  Rank r{ctx, comm, -1, -1, mem && *mem ? mem : "host"};
  hmc_comm_rank(comm, &r.rank);
  hmc_comm_size(comm, &r.size);
  std::string e;
  if (int(hosts.size()) != r.size) e = "NETNS_HOSTS does not give every rank's host";
  for (int k = 0; k < r.size && e.empty(); ++k) {
    hmc_comm_member_info_t m{};
    m.struct_size = sizeof m;
    hmc_comm_member_info(comm, k, &m);
    if (int(m.host) != hosts[size_t(k)])
      e = "rank " + std::to_string(k) + " is on host " + std::to_string(m.host) + " (" +
          m.hostname + "), expected " + std::to_string(hosts[size_t(k)]);
  }
  if (e.empty()) e = everything_role_on(r, r.mem == "host");
  // The reduce runs on hmc's algorithms, which HMC_COLL_BACKEND=ccl (device ranks) refuses.
  if (e.empty() && r.mem == "host") e = reduce_role(r);
  if (e.empty()) e = check_paths(r, hosts);
  const char* backend = getenv("NETNS_BACKEND");
  if (e.empty() && backend && *backend) e = check_metrics(r, backend);
  if (hmc_comm_destroy(comm) != HMC_SUCCESS && e.empty())
    e = std::string("destroy: ") + hmc_last_error();
  hmc_context_destroy(ctx);
  if (!e.empty()) {
    fprintf(stderr, "rank %d: %s\n", r.rank, e.c_str());
    return 1;
  }
  printf("rank %d: every collective and path as expected\n", r.rank);
  return 0;
}

// Drives two contexts of one process through known traffic (3 sends of 4 KiB, one all-reduce
// of a 2-rank communicator, one refused call), then checks what the metrics say: through
// hmc_metrics_dump and through the HTTP endpoint HMC_METRICS_ADDR opened. Writes both texts
// into DIR for promtool (tests/metrics/metrics_test.sh).
//
//   metrics_probe DIR      exit 0: the counters say what happened; 1: they do not (printed)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "hmc/hmc.h"
#include "tcp_client.h"

namespace {
int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    fprintf(stderr, "metrics_probe: FAIL: %s\n", what.c_str());
    ++failures;
  }
}

#define HMC_OK(expr)                                                                \
  do {                                                                              \
    hmc_status_t st_ = (expr);                                                      \
    if (st_ != HMC_SUCCESS) {                                                       \
      fprintf(stderr, "metrics_probe: %s: %s: %s\n", #expr, hmc_status_string(st_), \
              hmc_last_error());                                                    \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

std::string dump(hmc_context_t ctx) {
  size_t len = 0;
  HMC_OK(hmc_metrics_dump(ctx, nullptr, &len));
  std::string small(4, '\0');
  size_t tiny = small.size();
  check(hmc_metrics_dump(ctx, small.data(), &tiny) == HMC_ERR_TRUNCATED && tiny >= len - 64,
        "a 4-byte buffer is HMC_ERR_TRUNCATED with the size needed");
  std::vector<char> buf(len + 4096);
  len = buf.size();
  HMC_OK(hmc_metrics_dump(ctx, buf.data(), &len));
  check(len > 0 && buf[len - 1] == '\0', "the text ends in a NUL counted in len");
  return std::string(buf.data(), len - 1);
}

// The value of the first sample whose line starts with `series` (name and labels, as written).
double value_of(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      size_t sp = at + series.size();
      if (sp < text.size() && text[sp] == ' ') return std::stod(text.substr(sp + 1));
    }
    ++at;
  }
  return -1;
}

// GET path from host:port with a 5 s bound; returns the whole reply (head and body).
std::string http_get(const std::string& address, const std::string& path) {
  int fd = hmc_metrics_test::tcp_dial(address, 5);
  if (fd < 0) return "";
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) {
    close(fd);
    return "";
  }
  return hmc_metrics_test::read_to_end(fd);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

void all_reduce(hmc_context_t ctx, int rank, const std::string& rendezvous, float* out) {
  hmc_comm_options_t o{};
  o.struct_size = sizeof o;
  o.rank = rank;
  o.size = 2;
  o.rendezvous = rendezvous.c_str();
  o.timeout_ms = 20000;
  hmc_comm_t comm;
  HMC_OK(hmc_comm_create(ctx, &o, &comm));
  float in[256];
  for (int i = 0; i < 256; ++i) in[i] = float(rank + 1);
  hmc_request_t r;
  HMC_OK(hmc_all_reduce(comm, in, out, 256, HMC_DTYPE_F32, HMC_OP_SUM, &r));
  HMC_OK(hmc_request_wait(r, 20000, nullptr));
  HMC_OK(hmc_comm_destroy(comm));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: metrics_probe DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  hmc_context_t a, b;
  HMC_OK(hmc_context_create(nullptr, &a));
  HMC_OK(hmc_context_create(nullptr, &b));

  // b dials a; 3 sends of 4 KiB from b to a.
  char addr[HMC_ADDRESS_MAX];
  size_t alen = sizeof addr;
  HMC_OK(hmc_address(a, addr, &alen));
  hmc_peer_t to_a = nullptr, to_b = nullptr;
  std::thread dial([&] { HMC_OK(hmc_connect(b, addr, alen, 10000, &to_a)); });
  HMC_OK(hmc_accept(a, 10000, &to_b));
  dial.join();
  std::vector<char> out(4096, 'x'), in(4096);
  for (int i = 0; i < 3; ++i) {
    hmc_request_t s, r;
    HMC_OK(hmc_recv(to_b, in.data(), in.size(), 7, &r));
    HMC_OK(hmc_send(to_a, out.data(), out.size(), 7, &s));
    HMC_OK(hmc_request_wait(s, 10000, nullptr));
    size_t got = 0;
    HMC_OK(hmc_request_wait(r, 10000, &got));
    check(got == 4096 && in == out, "each receive got the 4 KiB sent");
  }
  // One refused call: a send of 8 bytes from NULL.
  hmc_request_t bad;
  check(hmc_send(to_a, nullptr, 8, 7, &bad) == HMC_ERR_INVALID_ARGUMENT,
        "a send from NULL is refused");

  // A 2-rank all-reduce, rank 0 on a and rank 1 on b; the store on a free loopback port.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t sl = sizeof sa;
  bind(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  getsockname(probe, reinterpret_cast<sockaddr*>(&sa), &sl);
  const std::string rendezvous = "tcp://127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  close(probe);
  float ra[256], rb[256];
  std::thread rank1([&] { all_reduce(b, 1, rendezvous, rb); });
  all_reduce(a, 0, rendezvous, ra);
  rank1.join();
  check(ra[0] == 3.0f && rb[255] == 3.0f, "the all-reduce summed 1 and 2");

  const std::string ta = dump(a), tb = dump(b);
  write_file(dir + "/dump_a.txt", ta);
  write_file(dir + "/dump_b.txt", tb);

  // b's peer a: 3 sends completed, 12 KiB. a's peer b: 3 receives, 12 KiB.
  std::smatch m;
  std::regex send_line(
      "hmc_transfer_bytes_total\\{peer=\"([^\"]*)\",conn=\"[0-9]+\",path=\"([^\"]*)\",op="
      "\"send\"\\} 12288");
  check(std::regex_search(tb, m, send_line), "b sent 12288 bytes to one peer:\n" + tb);
  std::regex recv_done(
      "hmc_transfers_total\\{peer=\"[^\"]*\",conn=\"[0-9]+\",path=\"[^\"]*\",op=\"recv\",result="
      "\"completed\"\\} "
      "3\n");
  check(std::regex_search(ta, recv_done), "a completed 3 receives from one peer");
  check(value_of(ta, "hmc_peers{state=\"live\"}") >= 1, "a has a live peer");
  // The all-reduce's series carry the communicator's id, the same on both ranks, and its
  // backend (host memory: hmc's own algorithms).
  std::regex coll_line(
      "hmc_collectives_total\\{comm=\"([0-9a-f]{16})\",collective=\"all_reduce\","
      "backend=\"hmc\",stage=\"completed\"\\} 1\n");
  std::smatch ma, mb;
  check(std::regex_search(ta, ma, coll_line), "a completed one all_reduce on hmc:\n" + ta);
  check(std::regex_search(tb, mb, coll_line), "b completed one all_reduce on hmc");
  const std::string comm_id = ma.size() > 1 ? ma[1].str() : "?";
  check(mb.size() > 1 && mb[1].str() == comm_id, "both ranks name the communicator alike");
  const std::string series = "{comm=\"" + comm_id + "\",collective=\"all_reduce\",backend=\"hmc\"";
  check(value_of(ta, "hmc_collective_bytes_total" + series + "}") == 1024,
        "a's all_reduce was 1024 bytes");
  check(value_of(ta, "hmc_collective_latency_seconds_count" + series + "}") == 1,
        "a's latency histogram holds one all_reduce");
  check(value_of(ta, "hmc_collective_latency_seconds_bucket" + series + ",le=\"+Inf\"}") == 1,
        "the +Inf bucket holds it");
  check(value_of(ta, "hmc_errors_total{code=\"HMC_ERR_INVALID_ARGUMENT\"}") >= 1,
        "the refused send is counted by code");

  // The endpoint: a's address is in its own text.
  std::regex endpoint("hmc_metrics_endpoint_info\\{address=\"([0-9.]+:[0-9]+)\"\\} 1");
  if (getenv("HMC_METRICS_ADDR")) {
    check(std::regex_search(ta, m, endpoint), "a says where its endpoint is");
    const std::string where = m.size() > 1 ? m[1].str() : "";
    check(where.rfind("127.0.0.1:", 0) == 0, "the endpoint is on loopback: " + where);
    std::string reply = http_get(where, "/metrics");
    check(reply.rfind("HTTP/1.0 200 OK\r\n", 0) == 0,
          "GET /metrics is 200: " + reply.substr(0, 80));
    check(reply.find("Content-Type: text/plain; version=0.0.4") != std::string::npos,
          "the reply says the exposition format's version");
    size_t body = reply.find("\r\n\r\n");
    std::string text = body == std::string::npos ? "" : reply.substr(body + 4);
    write_file(dir + "/http_a.txt", text);
    check(text.find("hmc_transfers_total{") != std::string::npos, "the body has the counters");
    check(http_get(where, "/other").rfind("HTTP/1.0 404", 0) == 0, "GET /other is 404");
  } else {
    check(!std::regex_search(ta, m, endpoint), "no endpoint without HMC_METRICS_ADDR");
  }
  hmc_peer_close(to_b);
  HMC_OK(hmc_context_destroy(b));
  HMC_OK(hmc_context_destroy(a));
  if (failures) return 1;
  printf("metrics_probe: ok\n");
  return 0;
}

// The metrics registry and its text (util/metrics.h) and the HTTP endpoint (util/metrics_http.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "../metrics/tcp_client.h"
#include "util/metrics.h"
#include "util/metrics_http.h"

using namespace hmc;

TEST(Metrics, LabelValuesAreEscaped) {
  EXPECT_EQ(MetricsText::escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsText m;
  m.family("x_total", "counter", "help");
  m.sample("x_total", {{"peer", "h\"1"}}, 3);
  EXPECT_EQ(m.str(), "# HELP x_total help\n# TYPE x_total counter\nx_total{peer=\"h\\\"1\"} 3\n");
}

TEST(Metrics, SamplesStayUnderTheirFamily) {
  MetricsText m;
  m.family("a", "gauge", "A");
  m.family("b", "gauge", "B");
  m.sample("b", {}, 1);
  m.sample("a", {}, 2);
  m.sample("b", {{"k", "v"}}, 0.5);
  EXPECT_EQ(m.str(),
            "# HELP a A\n# TYPE a gauge\na 2\n# HELP b B\n# TYPE b gauge\nb 1\nb{k=\"v\"} 0.5\n");
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  LatencyHistogram h;
  h.record(500);          // 0.5 us: the 1 us bucket
  h.record(2000000);      // 2 ms: the 5 ms bucket
  h.record(20000000000);  // 20 s: +Inf only
  auto s = h.snapshot();
  const auto& b = LatencyHistogram::bounds_s();
  ASSERT_EQ(s.cumulative.size(), b.size() + 1);
  EXPECT_EQ(s.cumulative[0], 1u);  // le=1e-06
  for (size_t i = 0; i < b.size(); ++i)
    EXPECT_EQ(s.cumulative[i], b[i] < 2e-3 ? 1u : 2u) << "le=" << b[i];
  EXPECT_EQ(s.cumulative.back(), 3u);
  EXPECT_EQ(s.count, 3u);
  EXPECT_NEAR(s.sum_s, 20.0020005, 1e-9);
  MetricsText m;
  m.family("lat_seconds", "histogram", "h");
  m.histogram("lat_seconds", {{"c", "x"}}, s);
  const std::string t = m.str();
  EXPECT_NE(t.find("lat_seconds_bucket{c=\"x\",le=\"+Inf\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_count{c=\"x\"} 3\n"), std::string::npos) << t;
}

TEST(Metrics, CollectivesCountTheirEnds) {
  CollMetrics c;
  const CollMetrics::Key ring{0xaa, "all_reduce", "hmc"};
  c.posted(1, ring, 1024, 1000);
  c.posted(2, ring, 1024, 1000);
  c.ended(1, HMC_SUCCESS, 3000);
  c.ended(2, HMC_ERR_PEER_LOST, 4000);
  c.ended(2, HMC_SUCCESS, 5000);  // already ended: no effect
  c.ended(9, HMC_SUCCESS, 5000);  // never posted: no effect
  auto s = c.snapshot();
  ASSERT_EQ(s.size(), 1u);
  const auto& e = s.at(ring);
  EXPECT_EQ(e.posted, 2u);
  EXPECT_EQ(e.completed, 1u);
  EXPECT_EQ(e.failed, 1u);
  EXPECT_EQ(e.bytes, 1024u);
  EXPECT_EQ(e.latency.count, 1u);
  EXPECT_NEAR(e.latency.sum_s, 2e-6, 1e-12);
}

// Each communicator and backend counts apart: the same collective on two communicators, or
// through the vendor library and then on hmc's paths, is two series.
TEST(Metrics, CollectivesApartByCommunicatorAndBackend) {
  CollMetrics c;
  const CollMetrics::Key a_hmc{0xaa, "all_reduce", "hmc"};
  const CollMetrics::Key a_ccl{0xaa, "all_reduce", "ccl"};
  const CollMetrics::Key b_hmc{0xbb, "all_reduce", "hmc"};
  c.posted(1, a_hmc, 8, 0);
  c.posted(2, a_ccl, 16, 0);
  c.posted(3, b_hmc, 32, 0);
  c.posted(4, b_hmc, 32, 0);
  for (uint64_t h : {1, 2, 3, 4}) c.ended(h, HMC_SUCCESS, 10);
  auto s = c.snapshot();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.at(a_hmc).bytes, 8u);
  EXPECT_EQ(s.at(a_ccl).bytes, 16u);
  EXPECT_EQ(s.at(b_hmc).completed, 2u);
  EXPECT_EQ(s.at(b_hmc).bytes, 64u);
}

TEST(Metrics, TransferCountersByOperation) {
  TransferCounters t;
  t.ended_locked(0, true, 100);
  t.ended_locked(0, false, 100);
  t.ended_locked(3, true, 7);
  t.ended_locked(4, true, 7);  // a collective: not a transfer of its own
  EXPECT_EQ(t.op[0].completed.load(), 1u);
  EXPECT_EQ(t.op[0].failed.load(), 1u);
  EXPECT_EQ(t.op[0].bytes.load(), 100u);
  EXPECT_EQ(t.op[3].bytes.load(), 7u);
  EXPECT_STREQ(TransferCounters::op_label(3), "get");
}

TEST(Metrics, AddressesParse) {
  std::string host, err;
  uint16_t port = 1;
  ASSERT_TRUE(parse_metrics_address("9464", &host, &port, &err));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9464);
  ASSERT_TRUE(parse_metrics_address("0.0.0.0:0", &host, &port, &err));
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 0);
  EXPECT_FALSE(parse_metrics_address("host:99999", &host, &port, &err));
  EXPECT_FALSE(parse_metrics_address("a:b", &host, &port, &err));
  EXPECT_NE(err.find("host:port"), std::string::npos);
}

namespace {
int dial(const std::string& address) {
  int fd = hmc_metrics_test::tcp_dial(address, 10);
  EXPECT_GE(fd, 0) << "connecting to " << address;
  return fd;
}
std::string get(const std::string& address, const std::string& request) {
  int fd = dial(address);
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), ssize_t(request.size()));
  return hmc_metrics_test::read_to_end(fd);
}
}  // namespace

TEST(MetricsServer, AnswersAndBoundsASilentClient) {
  MetricsServer s;
  ASSERT_EQ(s.start("HMC_METRICS_ADDR", "127.0.0.1:0", [] { return std::string("up 1\n"); }),
            HMC_SUCCESS);
  const std::string where = s.address();
  EXPECT_EQ(where.rfind("127.0.0.1:", 0), 0u) << where;
  std::string r = get(where, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("\r\n\r\nup 1\n"), std::string::npos) << r;
  EXPECT_EQ(get(where, "GET /x HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_EQ(get(where, "POST /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 405", 0), 0u);
  // A client that connects and says nothing holds the endpoint at most kRequestTimeoutMs.
  int silent = dial(where);
  auto t0 = std::chrono::steady_clock::now();
  r = get(where, "GET /metrics HTTP/1.0\r\n\r\n");
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.rfind("HTTP/1.0 200 OK", 0), 0u) << r;
  EXPECT_LT(waited, MetricsServer::kRequestTimeoutMs / 1000.0 + 2);
  close(silent);
  s.stop();
  EXPECT_FALSE(s.running());
}

TEST(MetricsServer, RefusesWhatItCannotParse) {
  MetricsServer s;
  EXPECT_EQ(s.start("HMC_METRICS_ADDR", "nowhere:x", [] { return std::string(); }), HMC_ERR_CONFIG);
  EXPECT_EQ(s.start("HMC_METRICS_ADDR", "example.com:1", [] { return std::string(); }),
            HMC_ERR_CONFIG);
  EXPECT_FALSE(s.running());
}

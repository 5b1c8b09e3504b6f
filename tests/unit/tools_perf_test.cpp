// hmc-perf's pure parts: argument parsing and the per-size plan, the control-message encoding,
// the --check pattern and the result formatting. The transfers themselves are exercised by
// running hmc-perf (bench/compare.sh, scripts/hmc-dev perf).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "../../tools/hmc-perf/options.h"
#include "../../tools/hmc-perf/pattern.h"
#include "../../tools/hmc-perf/report.h"
#include "../../tools/hmc-perf/session.h"
#include "../../tools/hmc-perf/wire.h"

namespace hmc::perf {
namespace {

// gtest's fixture base class is also called Test (with a Setup trap): name ours apart.
using PerfTest = hmc::perf::Test;
using PerfSetup = hmc::perf::Setup;

hmc_tools::Parsed parse_as(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "hmc-perf");
  return parse_args(static_cast<int>(args.size()), args.data(), o, err, "1.2.3");
}
bool parse(std::vector<const char*> args, Options* o, std::string* err) {
  return parse_as(std::move(args), o, err) == hmc_tools::Parsed::Run;
}

TEST(ToolsPerfOptions, LoopbackDefaults) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--loopback"}, &o, &err)) << err;
  EXPECT_EQ(o.mode, Mode::Loopback);
  EXPECT_EQ(o.test, PerfTest::Bw);
  EXPECT_EQ(o.op, Op::Send);
  EXPECT_EQ(o.sizes, std::vector<uint64_t>{8});
  EXPECT_EQ(o.progress_thread, 0);
  EXPECT_EQ(o.mem, "host");
  EXPECT_EQ(o.format, Format::Table);
}

TEST(ToolsPerfOptions, SizesRangeIsPowersOfTwo) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--loopback", "--sizes", "1:4M"}, &o, &err)) << err;
  ASSERT_EQ(o.sizes.size(), 23u);
  EXPECT_EQ(o.sizes.front(), 1u);
  EXPECT_EQ(o.sizes[1], 2u);
  EXPECT_EQ(o.sizes.back(), 4u << 20);
  Options o2;
  ASSERT_TRUE(parse({"--loopback", "--sizes=3:20"}, &o2, &err)) << err;
  EXPECT_EQ(o2.sizes, (std::vector<uint64_t>{3, 6, 12}));
}

TEST(ToolsPerfOptions, AllValueForms) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--connect",
                     "127.0.0.1:4000",
                     "--test",
                     "lat",
                     "--op=put",
                     "--size",
                     "64K",
                     "--iters",
                     "100",
                     "--warmup",
                     "0",
                     "--mem",
                     "cuda:0",
                     "--peer-mem",
                     "host",
                     "--net",
                     "hoststage",
                     "--path",
                     "hoststage/tcp",
                     "--check",
                     "--format",
                     "json",
                     "--timeout",
                     "500",
                     "--progress-thread",
                     "1",
                     "--quiet"},
                    &o, &err))
      << err;
  EXPECT_EQ(o.mode, Mode::Connect);
  EXPECT_EQ(o.connect, "127.0.0.1:4000");
  EXPECT_EQ(o.test, PerfTest::Lat);
  EXPECT_EQ(o.op, Op::Put);
  EXPECT_EQ(o.sizes, std::vector<uint64_t>{64u << 10});
  EXPECT_EQ(o.iters, 100);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.mem, "cuda:0");
  EXPECT_EQ(o.net, "hoststage");
  EXPECT_EQ(o.path, "hoststage/tcp");
  EXPECT_TRUE(o.check);
  EXPECT_EQ(o.format, Format::Json);
  EXPECT_EQ(o.timeout_ms, 500);
  EXPECT_EQ(o.progress_thread, 1);
  EXPECT_TRUE(o.quiet);
}

TEST(ToolsPerfOptions, HelpAndVersionNeedNoMode) {
  Options o;
  std::string text;
  EXPECT_EQ(parse_as({"--help"}, &o, &text), hmc_tools::Parsed::Help);
  EXPECT_EQ(parse_as({"-h"}, &o, &text), hmc_tools::Parsed::Help);
  EXPECT_EQ(parse_as({"--loopback", "--help"}, &o, &text), hmc_tools::Parsed::Help);
  EXPECT_EQ(parse_as({"--version"}, &o, &text), hmc_tools::Parsed::Version);
  EXPECT_EQ(text, "hmc-perf (hmc) 1.2.3");
}

// The parser's forms, as in every tool: --opt=value, --opt value, and sizes of size.h.
TEST(ToolsPerfOptions, ValueFormsAndSizes) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--loopback", "--size=1.5K", "--timeout=250", "--window", "4"}, &o, &err))
      << err;
  EXPECT_EQ(o.sizes, std::vector<uint64_t>{1536});
  EXPECT_EQ(o.timeout_ms, 250);
  EXPECT_EQ(o.window, 4);
  Options s;
  ASSERT_TRUE(parse({"--loopback", "--sizes", "1KiB:4K"}, &s, &err)) << err;
  EXPECT_EQ(s.sizes, (std::vector<uint64_t>{1024, 2048, 4096}));
}

// The server takes the options that apply to it, given to it as to a client.
TEST(ToolsPerfOptions, ServerTakesItsOwnOptions) {
  Options o;
  std::string err;
  ASSERT_TRUE(
      parse({"--listen=4000", "--bind", "0.0.0.0", "--forever", "--net", "hoststage", "--path",
             "hoststage/tcp", "--progress-thread", "1", "--timeout", "500", "--quiet"},
            &o, &err))
      << err;
  EXPECT_EQ(o.mode, Mode::Listen);
  EXPECT_EQ(o.listen_port, 4000);
  EXPECT_EQ(o.bind, "0.0.0.0");
  EXPECT_TRUE(o.forever);
  EXPECT_EQ(o.timeout_ms, 500);
  Options peer;
  ASSERT_TRUE(parse({"--peer-address", "00ff", "--parent-pid", "7", "--timeout", "9"}, &peer, &err))
      << err;
  EXPECT_EQ(peer.mode, Mode::Peer);
  EXPECT_EQ(peer.peer_address_hex, "00ff");
  EXPECT_EQ(peer.parent_pid, 7);
}

struct BadArgs {
  std::vector<const char*> args;
  const char* says;  // a piece of the message
};

TEST(ToolsPerfOptions, RejectsBadArgumentsWithAReason) {
  std::vector<BadArgs> cases = {
      {{}, "choose one of"},
      {{"--loopback", "--listen", "4000"}, "only one of"},
      {{"--listen", "0"}, "port"},
      {{"--listen", "70000"}, "port"},
      {{"--connect", "localhost"}, "HOST:PORT"},
      {{"--connect", ":4000"}, "HOST:PORT"},
      {{"--loopback", "--test", "rate"}, "bw or lat"},
      {{"--loopback", "--op", "atomic"}, "send, put or get"},
      {{"--loopback", "--size", "0"}, ">= 1"},
      {{"--loopback", "--size", "4X"}, "--size"},
      {{"--loopback", "--size", "8", "--sizes", "1:8"}, "not both"},
      {{"--loopback", "--sizes", "8:1"}, "MIN <= MAX"},
      {{"--loopback", "--sizes", "8"}, "MIN:MAX"},
      {{"--loopback", "--iters", "0"}, "--iters"},
      {{"--loopback", "--window", "0"}, "--window"},
      {{"--loopback", "--window", "100000"}, "--window"},
      {{"--loopback", "--test", "lat", "--window", "4"}, "ping-pong"},
      {{"--loopback", "--format", "csv"}, "table or json"},
      {{"--loopback", "--timeout", "0"}, "--timeout"},
      {{"--loopback", "--progress-thread", "2"}, "0 or 1"},
      {{"--loopback", "--path", "hoststage"}, "PLUGIN/DEVICE"},
      {{"--loopback", "--size", "1.0001K"}, "--size"},
      {{"--loopback", "--timeout", "1s"}, "milliseconds"},
      {{"--loopback", "--size"}, "--size"},
      {{"--loopback", "--check=maybe"}, "--check"},
      {{"--loopback", "--bogus"}, "not expected: --bogus"},
      {{"--loopback", "stray"}, "not expected: stray"},
      {{"--loopback", "--loopback"}, "only one of"},
      {{"--listen", "4000", "--size", "8"}, "for the client"},
      {{"--loopback", "--bind", "0.0.0.0"}, "for the server"},
      {{"--loopback", "--parent-pid", "1"}, "internal"},
      {{"--peer-address", "XYZ"}, "hex"},
  };
  for (const auto& c : cases) {
    Options o;
    std::string err;
    EXPECT_EQ(parse_as(c.args, &o, &err), hmc_tools::Parsed::Bad)
        << "accepted case saying " << c.says;
    EXPECT_NE(err.find(c.says), std::string::npos)
        << "message '" << err << "' lacks '" << c.says << "'";
  }
}

TEST(ToolsPerfOptions, PlanScalesWithSize) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--loopback", "--sizes", "1:64M"}, &o, &err)) << err;
  auto plan = make_plan(o);
  ASSERT_EQ(plan.size(), o.sizes.size());
  EXPECT_EQ(plan.front().iters, 10000);
  EXPECT_EQ(plan.front().window, 16);
  const SizePlan& four_m = plan[22];
  ASSERT_EQ(four_m.size, 4u << 20);
  EXPECT_EQ(four_m.iters, 64);  // 256 MiB per size
  EXPECT_EQ(four_m.window, 16);
  EXPECT_EQ(plan.back().window, 1);  // 64 MiB
  EXPECT_EQ(plan.back().iters, 16);  // the floor
  for (size_t i = 1; i < plan.size(); ++i) {
    EXPECT_LE(plan[i].iters, plan[i - 1].iters);
    EXPECT_LE(plan[i].window, plan[i - 1].window);
    EXPECT_GE(plan[i].warmup, 2);
  }
}

TEST(ToolsPerfOptions, PlanHonoursExplicitCounts) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse(
      {"--loopback", "--test", "lat", "--size", "1M", "--iters", "7", "--warmup", "0"}, &o, &err))
      << err;
  auto plan = make_plan(o);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].iters, 7);
  EXPECT_EQ(plan[0].warmup, 0);
  EXPECT_EQ(plan[0].window, 1);
}

TEST(ToolsPerfWire, SetupRoundTrip) {
  PerfSetup s;
  s.test = PerfTest::Lat;
  s.op = Op::Put;
  s.check = true;
  s.peer_mem = "cuda:1";
  s.plan = {{8, 100, 10, 1}, {4u << 20, 64, 6, 16}};
  s.client_desc = {1, 2, 3, 250};
  auto bytes = encode(s);
  PerfSetup d;
  std::string err;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &err)) << err;
  EXPECT_EQ(d.test, PerfTest::Lat);
  EXPECT_EQ(d.op, Op::Put);
  EXPECT_TRUE(d.check);
  EXPECT_EQ(d.peer_mem, "cuda:1");
  ASSERT_EQ(d.plan.size(), 2u);
  EXPECT_EQ(d.plan[1].size, 4u << 20);
  EXPECT_EQ(d.plan[1].iters, 64);
  EXPECT_EQ(d.plan[1].warmup, 6);
  EXPECT_EQ(d.plan[1].window, 16);
  EXPECT_EQ(d.client_desc, s.client_desc);
}

TEST(ToolsPerfWire, RejectsTruncatedForeignAndMismatchedMessages) {
  PerfSetup s;
  s.peer_mem = "host";
  s.plan = {{8, 1, 0, 1}};
  auto bytes = encode(s);
  PerfSetup d;
  std::string err;
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_FALSE(decode(bytes.data(), cut, &d, &err))
        << "accepted " << cut << " of " << bytes.size();
  auto foreign = bytes;
  foreign[0] ^= 0xff;
  EXPECT_FALSE(decode(foreign.data(), foreign.size(), &d, &err));
  EXPECT_NE(err.find("magic"), std::string::npos) << err;
  auto newer = bytes;
  newer[4] = 99;  // version
  EXPECT_FALSE(decode(newer.data(), newer.size(), &d, &err));
  EXPECT_NE(err.find("version 99"), std::string::npos) << err;
  Control c;
  EXPECT_FALSE(decode(bytes.data(), bytes.size(), MsgType::Begin, &c, &err));
  EXPECT_NE(err.find("expected control message"), std::string::npos) << err;
}

TEST(ToolsPerfWire, ReplyAndControlRoundTrip) {
  Reply r;
  r.status = -5;
  r.error = "no device named 'cuda:7'";
  r.path = "hoststage/shm";
  r.server_desc = std::vector<uint8_t>(300, 7);
  auto rb = encode(r);
  Reply rd;
  std::string err;
  ASSERT_TRUE(decode(rb.data(), rb.size(), &rd, &err)) << err;
  EXPECT_EQ(rd.status, -5);
  EXPECT_EQ(rd.error, r.error);
  EXPECT_EQ(rd.path, r.path);
  EXPECT_EQ(rd.server_desc, r.server_desc);

  Control c;
  c.type = MsgType::Result;
  c.index = 3;
  c.status = 1;
  c.bad_iteration = 12;
  c.bad_offset = 4095;
  c.text = "x";
  auto cb = encode(c);
  Control cd;
  ASSERT_TRUE(decode(cb.data(), cb.size(), MsgType::Result, &cd, &err)) << err;
  EXPECT_EQ(cd.index, 3u);
  EXPECT_EQ(cd.status, 1);
  EXPECT_EQ(cd.bad_iteration, 12u);
  EXPECT_EQ(cd.bad_offset, 4095u);
  EXPECT_EQ(cd.text, "x");
}

TEST(ToolsPerfWire, HexRoundTrip) {
  std::vector<uint8_t> b = {0, 1, 0x7f, 0x80, 0xff};
  EXPECT_EQ(to_hex(b), "00017f80ff");
  std::vector<uint8_t> d;
  ASSERT_TRUE(from_hex(to_hex(b), &d));
  EXPECT_EQ(d, b);
  EXPECT_FALSE(from_hex("abc", &d));
  EXPECT_FALSE(from_hex("zz", &d));
}

TEST(ToolsPerfPattern, CheckFindsTheFirstBadByte) {
  for (size_t n : {1u, 7u, 8u, 9u, 4096u, 4099u}) {
    std::vector<uint8_t> buf(n);
    pattern_fill(buf.data(), n, seed_forward(5));
    EXPECT_EQ(pattern_check(buf.data(), n, seed_forward(5)), n);
    for (size_t off : {size_t{0}, n / 2, n - 1}) {
      auto bad = buf;
      bad[off] ^= 0x01;
      EXPECT_EQ(pattern_check(bad.data(), n, seed_forward(5)), off) << "n " << n;
    }
  }
}

TEST(ToolsPerfPattern, DependsOnIterationDirectionAndOffset) {
  std::vector<uint8_t> a(64), b(64);
  pattern_fill(a.data(), a.size(), seed_forward(1));
  pattern_fill(b.data(), b.size(), seed_forward(2));
  EXPECT_NE(a, b);
  pattern_fill(b.data(), b.size(), seed_back(1));
  EXPECT_NE(a, b);
  // A message shifted by 8 bytes must not pass.
  std::vector<uint8_t> shifted(72);
  pattern_fill(shifted.data(), shifted.size(), seed_forward(1));
  EXPECT_LT(pattern_check(shifted.data() + 8, 64, seed_forward(1)), 64u);
  // Poison never passes.
  std::vector<uint8_t> poison(64, kPoison);
  EXPECT_LT(pattern_check(poison.data(), 64, seed_slot(0)), 64u);
}

TEST(ToolsPerfReport, Percentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(percentile(v, 0.50), 50);
  EXPECT_EQ(percentile(v, 0.99), 99);
  EXPECT_EQ(percentile(v, 1.0), 100);
  EXPECT_EQ(percentile({3.5}, 0.99), 3.5);
  EXPECT_LT(percentile({}, 0.5), 0);
}

TEST(ToolsPerfReport, JsonHasEveryField) {
  Result r;
  r.test = PerfTest::Bw;
  r.op = Op::Get;
  r.size = 4096;
  r.iters = 10;
  r.window = 4;
  r.bw_MBps = 1234.5;
  r.lat_us_avg = 3.25;
  r.path = "hoststage/\"shm\"";
  r.mem = "host";
  r.peer_mem = "cuda:0";
  r.ipc_messages = 3;
  r.shared_messages = 5;
  r.staged_transfers = 8;
  r.direct_transfers = 13;
  r.device_memory = "cuda direct (dma-buf); peer's rxe1:1 registers dma-bufs";
  std::string j = to_json(r);
  EXPECT_EQ(j.find('\n'), std::string::npos);
  auto o = nlohmann::json::parse(j);
  EXPECT_EQ(o["test"], "bw");
  EXPECT_EQ(o["op"], "get");
  EXPECT_EQ(o["size"], 4096);
  EXPECT_EQ(o["iters"], 10);
  EXPECT_EQ(o["window"], 4);
  EXPECT_DOUBLE_EQ(o["bw_MBps"].get<double>(), 1234.5);
  EXPECT_DOUBLE_EQ(o["lat_us_avg"].get<double>(), 3.25);
  EXPECT_TRUE(o["lat_us_p50"].is_null());  // not measured in a bandwidth test
  EXPECT_TRUE(o["lat_us_p99"].is_null());
  EXPECT_EQ(o["path"], "hoststage/\"shm\"");
  EXPECT_EQ(o["mem"], "host");
  EXPECT_EQ(o["peer_mem"], "cuda:0");
  EXPECT_EQ(o["ipc_messages"], 3);
  EXPECT_EQ(o["shared_messages"], 5);
  EXPECT_EQ(o["staged_transfers"], 8);
  EXPECT_EQ(o["direct_transfers"], 13);
  EXPECT_EQ(o["device_memory"], "cuda direct (dma-buf); peer's rxe1:1 registers dma-bufs");
  EXPECT_EQ(o["check"], false);
  // Rounded to the table's places; an unknown path is null, not "".
  r.bw_MBps = 1.23456;
  r.path.clear();
  o = nlohmann::json::parse(to_json(r));
  EXPECT_DOUBLE_EQ(o["bw_MBps"].get<double>(), 1.23);
  EXPECT_TRUE(o["path"].is_null());
}

TEST(ToolsPerfReport, TableRowAlignsWithHeader) {
  Result r;
  r.size = 4u << 20;
  r.iters = 64;
  r.window = 16;
  r.bw_MBps = 5000;
  r.lat_us_avg = 800;
  r.path = "hoststage/tcp";
  std::string row = table_row(r), head = table_header();
  EXPECT_EQ(row.find("hoststage/tcp"), head.find("path"));
  EXPECT_NE(row.find("4M"), std::string::npos);
  EXPECT_NE(row.find(" - "), std::string::npos);  // p50/p99 not measured in bw
}

// What a wait was for: put together only when the wait fails, from a text and an optional number.
TEST(ToolsPerfSession, WhatAWaitWasFor) {
  EXPECT_EQ(What("for ping", 12).str(), "for ping 12");
  EXPECT_EQ(What("for a send to complete").str(), "for a send to complete");
  EXPECT_EQ(What(std::string("waiting for ") + "setup").str(), "waiting for setup");
}

}  // namespace
}  // namespace hmc::perf

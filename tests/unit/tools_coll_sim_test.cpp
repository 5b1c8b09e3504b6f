// hmc-coll-sim's pure parts: its arguments, the nccl-tests sizes and counts, and whole runs driven
// by the tests' own schedules (ring all-gather, pairwise all-to-all) rather than the library's.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "../../tools/hmc-coll-sim/options.h"
#include "../../tools/hmc-coll-sim/run.h"
#include "coll/test_schedules.h"
#include "util/json.h"

namespace hmc::coll_sim {
namespace {

bool parse(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "hmc-coll-sim");
  return parse_args(static_cast<int>(args.size()), args.data(), o, err);
}

const AlgorithmSource kTestAlgorithms = {&coll::test::test_parse_algorithm,
                                         &coll::test::test_make_schedule};

TEST(ToolsCollSim, ParsesNcclTestsStyleArguments) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--cluster", "hosts=2", "-o", "all_gather", "-b", "1K", "-e", "1M", "-f", "4",
                     "-d", "half", "--redop=max", "--algo", "ring", "--format", "json"},
                    &o, &err))
      << err;
  EXPECT_EQ(o.cluster, "hosts=2");
  EXPECT_EQ(o.collective.kind, coll::CollKind::AllGather);
  EXPECT_EQ(o.datatype.dtype, HMC_DTYPE_F16);
  EXPECT_EQ(o.op, HMC_OP_MAX);
  EXPECT_EQ(o.algo, "ring");
  EXPECT_EQ(o.format, Format::Json);
  EXPECT_EQ(row_sizes(o), (std::vector<uint64_t>{1024, 4096, 16384, 65536, 262144, 1048576}));

  struct Case {
    std::vector<const char*> args;
    const char* error;
  } cases[] = {
      {{"-o", "all_reduce"}, "give the cluster"},
      {{"--cluster", "a", "--topology", "b"}, "give the cluster"},
      {{"--cluster", "a", "-o", "allreduce"}, "--collective: wants all_reduce"},
      {{"--cluster", "a", "-d", "fp8"}, "--datatype: wants float"},
      {{"--cluster", "a", "-b", "0"}, "--minbytes: wants a size >= 1"},
      {{"--cluster", "a", "-f", "1"}, "--stepfactor: wants a factor 2..1048576, got '1'"},
      {{"--cluster", "a", "-b", "2M", "-e", "1M"}, "-b 2M is larger than -e 1M"},
      {{"--cluster", "a", "--np", "4"}, "not expected: 4 --np"},
      {{"--cluster"}, "--cluster: 1 required TEXT missing"},
  };
  for (const Case& c : cases) {
    Options bad;
    EXPECT_FALSE(parse(c.args, &bad, &err)) << c.error;
    EXPECT_NE(err.find(c.error), std::string::npos) << err;
  }
  // CLI11's forms: an attached short value, --opt=value with an = inside the value.
  Options attached;
  ASSERT_TRUE(parse({"--cluster=hosts=2,gpus_per_host=2", "-b1K", "-e4K", "-f4"}, &attached, &err))
      << err;
  EXPECT_EQ(attached.cluster, "hosts=2,gpus_per_host=2");
  EXPECT_EQ(attached.min_bytes, 1024u);
  EXPECT_EQ(attached.max_bytes, 4096u);
  EXPECT_EQ(attached.factor, 4);
  Options help;
  EXPECT_TRUE(parse({"--help"}, &help, &err));
  EXPECT_TRUE(help.help);
}

TEST(ToolsCollSim, CountsFollowNcclTests) {
  using coll::CollKind;
  EXPECT_EQ(count_for(CollKind::AllReduce, 1024, 4, 8), 256u);
  EXPECT_EQ(count_for(CollKind::AllGather, 1024, 4, 8), 32u);
  EXPECT_EQ(count_for(CollKind::AllToAll, 8, 4, 8), 1u);  // at least one element
}

TEST(ToolsCollSim, TableRowsMatchTheSimulator) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--cluster", "hosts=4,gpus_per_host=1,nic_gbps=8,nic_latency_us=2", "-o",
                     "all_to_all", "-d", "uint8", "-b", "4M", "-e", "8M"},
                    &o, &err))
      << err;
  std::ostringstream out, errs;
  ASSERT_EQ(run(o, kTestAlgorithms, out, errs), 0) << errs.str();
  std::string text = out.str();
  EXPECT_NE(text.find("# hmc-coll-sim: all_to_all on 4 hosts, 4 ranks (cuda 4)"), std::string::npos)
      << text;
  // 4 MiB in all: 1 MiB per peer, 3 pairwise steps of 2 us + 1 MiB at 1 byte/ns.
  double time_us = 3 * (2 + 1048576 / 1000.0);
  double algbw = 4194304 / time_us / 1e3;
  std::string row =
      fmt::format("{:>12} {:>12} {:>9} {:>6} {:>5} {:>11.2f} {:>8.2f} {:>8.2f}  {}", 4194304,
                  1048576, "uint8", "sum", 0, time_us, algbw, algbw * 3 / 4, "pairwise");
  EXPECT_NE(text.find(row), std::string::npos) << text << "\nwanted:\n" << row;
  EXPECT_NE(text.find("     8388608 "), std::string::npos) << text;

  // Floats: 8 and 16 bytes both make one element per peer (16 bytes in all): one row.
  o = Options();
  ASSERT_TRUE(parse({"--cluster", "hosts=4,gpus_per_host=1", "-o", "all_to_all", "-b", "8", "-e",
                     "32", "--format", "json"},
                    &o, &err));
  std::ostringstream small;
  ASSERT_EQ(run(o, kTestAlgorithms, small, errs), 0) << errs.str();
  std::string rows = small.str();
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 2) << rows;  // 16 and 32 bytes
}

TEST(ToolsCollSim, JsonRowsParse) {
  Options o;
  std::string err;
  ASSERT_TRUE(parse({"--topology", HMC_TEST_SOURCE_DIR "/bench/coll-sim/mixed-2x8.json", "-o",
                     "all_gather", "-b", "64K", "-e", "1M", "-f", "4", "--format", "json"},
                    &o, &err))
      << err;
  std::ostringstream out, errs;
  ASSERT_EQ(run(o, kTestAlgorithms, out, errs), 0) << errs.str();
  std::istringstream lines(out.str());
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    json::Value v;
    ASSERT_TRUE(json::parse(line, &v, &err)) << err << ": " << line;
    EXPECT_EQ(v.find("collective")->string, "all_gather");
    EXPECT_EQ(v.find("ranks")->number, 16);
    EXPECT_EQ(v.find("algorithm")->string, "ring");
    EXPECT_EQ(v.find("transfers")->number, 16 * 15);
    EXPECT_NEAR(v.find("busbw_GBps")->number, v.find("algbw_GBps")->number * 15 / 16, 2e-3);
    ++rows;
  }
  EXPECT_EQ(rows, 3);  // 64K, 256K, 1M
}

TEST(ToolsCollSim, ErrorsGiveTheExitStatus) {
  std::ostringstream out, errs;
  Options o;
  o.cluster = "hosts=2,nic_speed=1";
  EXPECT_EQ(run(o, kTestAlgorithms, out, errs), 2);
  EXPECT_NE(errs.str().find("unknown key 'nic_speed'"), std::string::npos) << errs.str();
  o.cluster = "hosts=2";
  o.algo = "butterfly";
  EXPECT_EQ(run(o, kTestAlgorithms, out, errs), 2);
  EXPECT_NE(errs.str().find("unknown algorithm 'butterfly'"), std::string::npos);
  // Schedules the simulator rejects: a make_schedule that forgets every receive.
  const AlgorithmSource broken = {
      &coll::test::test_parse_algorithm,
      [](const coll::CollArgs& a, const coll::GroupShape& s, int rank, coll::Algorithm algo) {
        coll::Schedule sched = coll::test::test_make_schedule(a, s, rank, algo);
        for (auto& step : sched.steps)
          for (auto it = step.actions.begin(); it != step.actions.end();)
            it = it->kind == coll::ActionKind::Recv ? step.actions.erase(it) : it + 1;
        return sched;
      }};
  o.algo = "auto";
  o.collective = collectives()[3];  // all_to_all
  EXPECT_EQ(run(o, broken, out, errs), 1);
  EXPECT_NE(errs.str().find("has no matching Recv"), std::string::npos) << errs.str();
}

// --backend ccl: the vendor libraries' schedules (coll/ccl_schedules.h) instead of the
// algorithms; its options and what it refuses.
TEST(ToolsCollSim, CclBackend) {
  Options o;
  std::string err;
  ASSERT_TRUE(
      parse({"--cluster", "hosts=2,gpus_per_host=4,nics_per_host=4,host_vendors=cuda:1+hip:1", "-b",
             "1M", "-e", "1M", "--backend", "ccl", "--ccl-groups", "host", "--format", "json"},
            &o, &err))
      << err;
  EXPECT_TRUE(o.ccl);
  EXPECT_TRUE(o.ccl_per_host);
  std::ostringstream out, errs;
  ASSERT_EQ(run(o, kTestAlgorithms, out, errs), 0) << errs.str();
  json::Value row;
  ASSERT_TRUE(json::parse(out.str(), &row, &err)) << err << out.str();
  EXPECT_EQ(row.find("algorithm")->string, "hierarchical_ccl");
  EXPECT_GT(row.find("time_us")->number, 0);
  // One vendor, auto: the faster of the library's ring and tree, no slower than either.
  auto time_of = [&](const char* algo) {
    Options one;
    std::string e;
    EXPECT_TRUE(parse({"--cluster", "hosts=4,gpus_per_host=2", "-b", "8", "-e", "8", "--backend",
                       "ccl", "--ccl-algo", algo, "--format", "json"},
                      &one, &e))
        << e;
    std::ostringstream o1, e1;
    EXPECT_EQ(run(one, kTestAlgorithms, o1, e1), 0) << e1.str();
    json::Value v;
    EXPECT_TRUE(json::parse(o1.str(), &v, &e)) << e;
    return v.find("time_us")->number;
  };
  double ring = time_of("ring"), tree = time_of("tree"), best = time_of("auto");
  EXPECT_DOUBLE_EQ(best, std::min(ring, tree));
  // What it refuses: --algo with ccl, ccl options without it, a collective it has no form for.
  for (auto args : std::vector<std::vector<const char*>>{
           {"--cluster", "a", "--backend", "ccl", "--algo", "ring"},
           {"--cluster", "a", "--ccl-algo", "tree"},
           {"--cluster", "a", "--backend", "nccl"},
           {"--cluster", "a", "--backend", "ccl", "--ccl-groups", "rack"}}) {
    Options bad;
    EXPECT_FALSE(parse(args, &bad, &err)) << args.back();
  }
  Options a2a;
  ASSERT_TRUE(parse(
      {"--cluster", "hosts=2", "-o", "all_to_all", "--backend", "ccl", "-b", "1K", "-e", "1K"},
      &a2a, &err));
  std::ostringstream o2, e2;
  EXPECT_EQ(run(a2a, kTestAlgorithms, o2, e2), 1);
  EXPECT_NE(e2.str().find("through the vendor libraries"), std::string::npos) << e2.str();
}

}  // namespace
}  // namespace hmc::coll_sim

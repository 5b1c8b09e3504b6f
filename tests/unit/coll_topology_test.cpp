// Cluster descriptions for the simulator: the JSON reader under them, the topology file (with
// errors that name the line and the field), the one-line generator, and which intra-host path
// each pair of ranks takes.
#include <gtest/gtest.h>

#include <string>

#include "coll/topology.h"
#include "util/json.h"
#include "util/status.h"

namespace hmc::coll {
namespace {

// An input that must be refused, and what the refusal must say.
struct Refusal {
  const char* text;
  const char* error;
};

TEST(Json, ParsesTheDocumentWithPositions) {
  json::Value v;
  std::string err;
  ASSERT_TRUE(json::parse("{\"a\": [1, -2.5e1, true, null],\n \"b\": \"x\\u00e9\\n\"}", &v, &err))
      << err;
  ASSERT_EQ(v.type, json::Type::Object);
  const json::Value* a = v.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 4u);
  EXPECT_EQ(a->items[1].number, -25);
  EXPECT_TRUE(a->items[2].boolean);
  EXPECT_EQ(a->items[3].type, json::Type::Null);
  const json::Value* b = v.find("b");
  EXPECT_EQ(b->string, "x\xc3\xa9\n");
  EXPECT_EQ(b->line, 2);
  EXPECT_EQ(b->column, 7);
  EXPECT_EQ(v.find("c"), nullptr);
}

TEST(Json, MalformedTextSaysWhere) {
  const Refusal cases[] = {
      {"{\"a\": 1,}", "line 1, column 9: expected a quoted member name"},
      {"{\"a\": 1\n \"b\": 2}", "line 2, column 2: expected ',' or '}' in an object"},
      {"[1, 2", "unterminated array"},
      {"{\"a\": 1, \"a\": 2}", "member \"a\" given twice"},
      {"01", "may not start with 0"},
      {"\"abc", "unterminated string"},
      {"tru", "unknown word"},
      {"{} x", "after the document"},
      {"\"\\ud800\"", "unpaired surrogate"},
      {"", "unexpected end of text"},
  };
  for (const Refusal& c : cases) {
    json::Value v;
    std::string err;
    EXPECT_FALSE(json::parse(c.text, &v, &err)) << c.text;
    EXPECT_NE(err.find(c.error), std::string::npos) << c.text << ": " << err;
  }
  std::string deep(100, '[');
  json::Value v;
  std::string err;
  EXPECT_FALSE(json::parse(deep, &v, &err));
  EXPECT_NE(err.find("nested deeper"), std::string::npos) << err;
}

const char* kMixed = R"({
  "name": "two mixed hosts",
  "paths": {"device_ipc": {"gbps": 2400, "latency_us": 3}},
  "pairs": [{"vendors": ["cuda", "hip"], "path": "staged", "gbps": 150}],
  "vendors": {
    "cuda": {"copy_gbps": 9000, "reduce_gbps": 7000},
    "hip": {"ipc": false}
  },
  "hosts": [
    {"name": "a", "ranks": ["cuda", "cuda", "hip", "hip"],
     "nics": [{"gbps": 400, "latency_us": 2}, {"gbps": 400, "latency_us": 2}]},
    {"name": "b", "ranks": ["host", "hip"], "nics": [{"gbps": 200}], "memory_gbps": 800}
  ]
})";

TEST(CollTopology, ReadsAFile) {
  Topology t;
  ASSERT_EQ(parse_topology(kMixed, "mixed.json", &t), HMC_SUCCESS) << last_error();
  ASSERT_EQ(t.size(), 6);
  EXPECT_EQ(t.hosts.size(), 2u);
  EXPECT_EQ(t.host_of_rank, (std::vector<int>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(t.nic_of_rank, (std::vector<int>{0, 0, 1, 1, 0, 0}));
  GroupShape shape = t.shape();
  EXPECT_EQ(shape.size, 6);
  EXPECT_EQ(shape.vendor_of_rank,
            (std::vector<std::string>{"cuda", "cuda", "hip", "hip", "host", "hip"}));
  EXPECT_EQ(t.hosts[1].nics[0].latency_us, 3.0);  // the default NIC latency
  EXPECT_EQ(t.hosts[1].memory_gbps, 800);
  EXPECT_EQ(t.vendors[t.vendor_of_rank[0]].copy_gbps, 9000);

  Link link;
  EXPECT_EQ(t.intra_path(0, 1, &link), IntraPath::DeviceIpc);
  EXPECT_EQ(link.gbps, 2400);
  EXPECT_EQ(t.intra_path(0, 2, &link), IntraPath::Staged);
  EXPECT_EQ(link.gbps, 150);                                // the pair's own link
  EXPECT_EQ(t.intra_path(2, 3, &link), IntraPath::Staged);  // hip without IPC
  EXPECT_EQ(t.intra_path(4, 5, &link), IntraPath::Staged);  // host and device
}

TEST(CollTopology, RepeatMakesManyHosts) {
  Topology t;
  ASSERT_EQ(parse_topology(R"({"vendors": {"cuda": {}}, "hosts": [{"name": "n", "repeat": 3,
      "ranks": ["cuda", "cuda"], "nics": [{}]}]})",
                           "r.json", &t),
            HMC_SUCCESS)
      << last_error();
  ASSERT_EQ(t.size(), 6);
  EXPECT_EQ(t.hosts[2].name, "n2");
  EXPECT_EQ(t.hosts[2].ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(t.hosts[2].nics[0].gbps, 400);
  // Unnamed hosts are numbered across the file.
  ASSERT_EQ(parse_topology(R"({"hosts": [{"ranks": ["host"], "nics": [{}]},
      {"repeat": 2, "ranks": ["host"], "nics": [{}]}]})",
                           "r.json", &t),
            HMC_SUCCESS)
      << last_error();
  EXPECT_EQ(t.hosts[2].name, "host2");
}

TEST(CollTopology, ErrorsNameTheLineAndField) {
  const Refusal cases[] = {
      {"{\"hosts\": [{\"ranks\": [\"host\"],\n \"nics\": [{\"gbps\": \"fast\"}]}]}",
       "bad.json:2: hosts[0].nics[0].gbps: wants a number, got a string"},
      {"{\"hosts\": [{\"ranks\": [\"cuda\"]}]}",
       "bad.json:1: hosts[0].ranks[0]: vendor \"cuda\" is not in \"vendors\""},
      {"{\"hosts\": [{\"ranks\": [\"host\"], \"nic\": []}]}",
       "hosts[0].nic: unknown member (known: name, repeat, ranks, nics, memory_gbps, cores, "
       "cpu_gbps)"},
      {"{\"hosts\": [{\"ranks\": [\"host\"], \"nics\": [{\"gbps\": -1}]}]}",
       "hosts[0].nics[0].gbps: wants a number >= 0, got -1"},
      {"{\"paths\": {\"nvlink\": {}}, \"hosts\": []}", "paths.nvlink: unknown path"},
      {"{\"pairs\": [{\"vendors\": [\"host\"], \"path\": \"staged\"}], \"hosts\": []}",
       "pairs[0].vendors: wants two vendor names"},
      {"{\"vendors\": {\"cuda\": {\"ipc\": 1}}, \"hosts\": []}",
       "vendors.cuda.ipc: wants true or false, got a number"},
      {"{}", "bad.json:1: hosts: missing"},
      {"{\"hosts\": []}", "bad.json: the cluster has no ranks"},
      {"{\"hosts\": [{\"ranks\": [\"host\"]}, {\"ranks\": [\"host\"]}]}",
       "host host0 has no NIC but the cluster has 2 hosts"},
      {"{\"hosts\": [}", "bad.json: not valid JSON: line 1, column 12"},
  };
  for (const Refusal& c : cases) {
    Topology t;
    EXPECT_EQ(parse_topology(c.text, "bad.json", &t), HMC_ERR_INVALID_ARGUMENT) << c.text;
    EXPECT_NE(last_error().find(c.error), std::string::npos) << c.text << "\n" << last_error();
  }
  Topology t;
  EXPECT_EQ(load_topology("/nonexistent/cluster.json", &t), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("cannot open"), std::string::npos);
}

TEST(CollTopology, TheExampleFileParses) {
  Topology t;
  ASSERT_EQ(load_topology(HMC_TEST_SOURCE_DIR "/bench/coll-sim/mixed-2x8.json", &t), HMC_SUCCESS)
      << last_error();
  EXPECT_EQ(t.size(), 16);
}

TEST(CollTopology, GeneratesALargeMixedCluster) {
  Topology t;
  ASSERT_EQ(generate_topology("hosts=128,gpus_per_host=8,vendors=cuda:4+hip:4,nic_gbps=400,"
                              "nics_per_host=8,ipc_gbps=3600",
                              &t),
            HMC_SUCCESS)
      << last_error();
  ASSERT_EQ(t.size(), 1024);
  EXPECT_EQ(t.hosts.size(), 128u);
  EXPECT_EQ(t.vendors[t.vendor_of_rank[3]].name, "cuda");
  EXPECT_EQ(t.vendors[t.vendor_of_rank[4]].name, "hip");
  EXPECT_EQ(t.host_of_rank[1023], 127);
  EXPECT_EQ(t.nic_of_rank[13], 5);  // rail-aligned: local rank 5 on NIC 5
  EXPECT_EQ(t.paths[static_cast<int>(IntraPath::DeviceIpc)].gbps, 3600);
  EXPECT_EQ(t.hosts[0].nics[0].gbps, 400);
  EXPECT_NE(t.summary().find("128 hosts, 1024 ranks (cuda 512, hip 512)"), std::string::npos)
      << t.summary();
}

TEST(CollTopology, ExecutorCostAndCores) {
  Topology t;
  ASSERT_EQ(parse_topology(R"({"executor": {"step_us": 7.5, "transfer_us": 1.5},
      "hosts": [{"ranks": ["host", "host", "host"], "cores": 2, "cpu_gbps": 40}]})",
                           "c.json", &t),
            HMC_SUCCESS)
      << last_error();
  EXPECT_EQ(t.executor.step_us, 7.5);
  EXPECT_EQ(t.executor.transfer_us, 1.5);
  EXPECT_EQ(t.hosts[0].cores, 2);
  EXPECT_EQ(t.hosts[0].cpu_gbps, 40);
  EXPECT_DOUBLE_EQ(t.hosts[0].oversubscription(), 1.5);
  EXPECT_EQ(parse_topology(R"({"hosts": [{"ranks": ["host"], "cores": 1.5}]})", "c.json", &t),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("hosts[0].cores: wants a whole number"), std::string::npos)
      << last_error();
  EXPECT_EQ(
      parse_topology(R"({"executor": {"step": 1}, "hosts": [{"ranks": ["host"]}]})", "c.json", &t),
      HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("executor.step: unknown member"), std::string::npos) << last_error();
  ASSERT_EQ(generate_topology("ranks_per_host=4,vendors=host,cores_per_host=2,cpu_gbps=30,"
                              "step_us=12,transfer_us=2",
                              &t),
            HMC_SUCCESS)
      << last_error();
  EXPECT_EQ(t.hosts[0].cores, 2);
  EXPECT_EQ(t.hosts[0].cpu_gbps, 30);
  EXPECT_EQ(t.executor.step_us, 12);
  EXPECT_EQ(t.executor.transfer_us, 2);
  EXPECT_DOUBLE_EQ(t.hosts[0].oversubscription(), 2);
}

TEST(CollTopology, GeneratorRejectsBadSpecs) {
  const Refusal cases[] = {
      {"hosts=2,gpus_per_host=8,vendors=cuda:4+hip:3", "places 7 ranks on a host"},
      {"hosts=two", "hosts=two: wants a number >= 1"},
      {"hosts=0", "hosts=0: wants a number >= 1"},
      {"nic_speed=400", "unknown key 'nic_speed'"},
      {"gpudirect=yes", "gpudirect=yes: wants 0 or 1"},
      {"hosts", "'hosts' is not KEY=VALUE"},
      {"hosts=2,nics_per_host=0", "has no NIC"},
  };
  for (const Refusal& c : cases) {
    Topology t;
    EXPECT_EQ(generate_topology(c.text, &t), HMC_ERR_INVALID_ARGUMENT) << c.text;
    EXPECT_NE(last_error().find(c.error), std::string::npos) << c.text << "\n" << last_error();
  }
}

}  // namespace
}  // namespace hmc::coll

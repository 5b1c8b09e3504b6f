// The simulator's model of the vendor collective libraries (coll/ccl_schedules.h): steps inside
// a library go over the vendor's fabric and cost the library's call, the library's rings spread
// over a host's NICs by channel, the hierarchical all-reduce over vendor groups moves the bytes
// its three phases should on each link and, for one group, is the library's own ring. Checked
// against the structure (bytes per link, transfer counts, differences between two runs), not
// against figures of the model's defaults.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coll/ccl_schedules.h"
#include "coll/simulate.h"
#include "coll/test_schedules.h"
#include "coll/test_topology.h"
#include "coll/topology.h"
#include "util/status.h"

namespace hmc::coll {
namespace {

using test::parse;
using test::recv_from;
using test::send_to;

Topology generate(const std::string& spec) {
  Topology t;
  EXPECT_EQ(generate_topology(spec, &t), HMC_SUCCESS) << last_error();
  return t;
}

SimResult run(const std::vector<Schedule>& s, const Topology& t) {
  SimResult r;
  EXPECT_EQ(simulate(s, t, &r), HMC_SUCCESS) << last_error();
  return r;
}

std::vector<Schedule> ccl_schedules(const CollArgs& a, const Topology& t, CclAlgo algo) {
  TopologyGroups vg = topology_groups(t);
  std::vector<Schedule> out(size_t(t.size()));
  for (int r = 0; r < t.size(); ++r)
    EXPECT_EQ(make_ccl_schedule(a, t, vg, r, algo, &out[size_t(r)]), HMC_SUCCESS) << last_error();
  return out;
}

std::vector<Schedule> hierarchical(const CollArgs& a, const Topology& t) {
  TopologyGroups vg = topology_groups(t);
  std::vector<Schedule> out(size_t(t.size()));
  for (int r = 0; r < t.size(); ++r)
    EXPECT_EQ(make_ccl_hierarchical_all_reduce(a, t, vg, r, &out[size_t(r)]), HMC_SUCCESS)
        << last_error();
  return out;
}

CollArgs all_reduce(uint64_t floats) {
  CollArgs a;
  a.kind = CollKind::AllReduce;
  a.dtype = HMC_DTYPE_F32;
  a.count = floats;
  return a;
}

double bytes_on(const SimResult& r, const std::string& resource) {
  auto it = r.resource_bytes.find(resource);
  return it == r.resource_bytes.end() ? 0 : it->second;
}

// Two ranks of one vendor on one host; one step that sends 10^6 bytes.
Topology two_cuda(double call_us) {
  return parse(R"({"vendors": {"cuda": {"ccl": {"library": "nccl", "fabric_gbps": 8,
                    "pair_gbps": 8, "latency_us": 2, "call_us": )" +
               std::to_string(call_us) + R"(, "step_us": 0.5, "channels": 1}}},
                    "paths": {"device_ipc": {"gbps": 16, "latency_us": 1}},
                    "hosts": [{"ranks": ["cuda", "cuda"]}]})");
}

Schedule one_step(const Action& a, bool ccl, bool call) {
  Schedule s;
  s.steps.push_back(Step{{a}, ccl, call});
  return s;
}

TEST(CclSim, LibraryStepsTakeTheFabricAndCostTheCall) {
  Topology t = two_cuda(5);
  // Inside the library: 0.5 us step + 5 us call, 2 us latency, 10^6 bytes at 1 byte/ns.
  SimResult in = run(
      {one_step(send_to(1, 1000000), true, true), one_step(recv_from(0, 1000000), true, true)}, t);
  EXPECT_DOUBLE_EQ(in.time_us, 0.5 + 5 + 2 + 1000);
  EXPECT_EQ(bytes_on(in, "rank 0 fabric out"), 1e6);
  EXPECT_EQ(bytes_on(in, "rank 1 fabric in"), 1e6);
  EXPECT_EQ(bytes_on(in, "rank 0 device_ipc out"), 0);
  // A later step of the same call pays the step's cost only.
  SimResult later = run(
      {one_step(send_to(1, 1000000), true, false), one_step(recv_from(0, 1000000), true, false)},
      t);
  EXPECT_DOUBLE_EQ(in.time_us - later.time_us, 5);
  // The same transfer on hmc's paths: device IPC (16 Gb/s, 1 us), no library cost.
  SimResult out = run(
      {one_step(send_to(1, 1000000), false, false), one_step(recv_from(0, 1000000), false, false)},
      t);
  EXPECT_DOUBLE_EQ(out.time_us, 1 + 500);
  EXPECT_EQ(bytes_on(out, "rank 0 fabric out"), 0);
  // An empty first step of a call hands its cost to the next step.
  Schedule empty_first;
  empty_first.steps.push_back(Step{{}, true, true});
  empty_first.steps.push_back(Step{{send_to(1, 1000000)}, true, false});
  Schedule empty_first_recv;
  empty_first_recv.steps.push_back(Step{{}, true, true});
  empty_first_recv.steps.push_back(Step{{recv_from(0, 1000000)}, true, false});
  EXPECT_DOUBLE_EQ(run({empty_first, empty_first_recv}, t).time_us, in.time_us);
}

TEST(CclSim, MalformedLibraryStepsAreRejected) {
  Topology t = parse(R"({"vendors": {"cuda": {}, "hip": {}},
                         "hosts": [{"ranks": ["cuda", "hip", "host"]}]})");
  SimResult r;
  // A library step between two vendors.
  EXPECT_EQ(simulate({one_step(send_to(1, 8), true, true), one_step(recv_from(0, 8), true, true),
                      Schedule{}},
                     t, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("a library serves one vendor"), std::string::npos) << last_error();
  // A library step on a host-memory rank, which has no library.
  EXPECT_EQ(
      simulate({Schedule{}, Schedule{}, one_step(test::local(ActionKind::Copy, 8), true, true)}, t,
               &r),
      HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("has none"), std::string::npos) << last_error();
  // One side inside the library, the other outside.
  Topology two = two_cuda(0);
  EXPECT_EQ(simulate({one_step(send_to(1, 8), true, true), one_step(recv_from(0, 8), false, false)},
                     two, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("outside"), std::string::npos) << last_error();
}

TEST(CclSim, TopologyDescribesTheLibraries) {
  Topology t = generate("hosts=4,host_vendors=cuda:2+hip:2,ccl_channels=4,fabric_latency_us=1");
  ASSERT_EQ(t.size(), 32);
  EXPECT_EQ(t.vendors[size_t(t.vendor_of_rank[0])].name, "cuda");
  EXPECT_EQ(t.vendors[size_t(t.vendor_of_rank[16])].name, "hip");
  const CclSpec& nccl = t.vendors[size_t(t.vendor_of_rank[0])].ccl;
  const CclSpec& rccl = t.vendors[size_t(t.vendor_of_rank[31])].ccl;
  EXPECT_EQ(nccl.library, "nccl");
  EXPECT_EQ(rccl.library, "rccl");
  EXPECT_EQ(nccl.channels, 4);
  EXPECT_EQ(rccl.fabric.latency_us, 1);
  EXPECT_GT(nccl.fabric.gbps, 0);
  EXPECT_EQ(generate("hosts=1,ccl=0").vendors[1].ccl.library, "");
  Topology bad;
  EXPECT_EQ(generate_topology("hosts=3,host_vendors=cuda:2+hip:2", &bad), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(generate_topology("hosts=2,vendors=hip,host_vendors=cuda:2", &bad),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_topology(R"({"vendors": {"cuda": {"ccl": {"chanels": 2}}},
                               "hosts": [{"ranks": ["cuda"]}]})",
                           "t.json", &bad),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("t.json:1: vendors.cuda.ccl.chanels"), std::string::npos)
      << last_error();
  Topology file = parse(R"({"vendors": {"mlu": {"ccl": {"fabric_gbps": 100, "channels": 2}}},
                           "hosts": [{"ranks": ["mlu", "mlu"]}]})");
  EXPECT_EQ(file.vendors[1].ccl.library, "cncl");
  EXPECT_EQ(file.vendors[1].ccl.fabric.gbps, 100);
  EXPECT_EQ(file.vendors[1].ccl.channels, 2);
}

// Two hosts of 4 ranks, one NIC per rank; `channels` rings.
Topology two_hosts(const std::string& vendors, int channels) {
  return generate("hosts=2,gpus_per_host=4,nics_per_host=4," + vendors +
                  ",ccl_channels=" + std::to_string(channels));
}

TEST(CclSim, RingChannelsSpreadOverTheNics) {
  const uint64_t floats = 4 * 4 * 8 * 1024, bytes = floats * 4;  // divisible by ranks x channels
  const int n = 8;
  for (int channels : {1, 4}) {
    Topology t = two_hosts("vendors=cuda", channels);
    SimResult r = run(ccl_schedules(all_reduce(floats), t, CclAlgo::Ring), t);
    // Each of the ring's links carries 2 (n - 1) / n of the buffer per channel's share; a host's
    // crossing of channel c leaves from a different rank, so from a different NIC.
    double per_crossing = 2.0 * (n - 1) / n * double(bytes) / channels;
    double total = 0;
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        double sent =
            bytes_on(r, "host" + std::to_string(h) + " NIC " + std::to_string(k) + " send");
        total += sent;
        if (channels == 4) {
          EXPECT_DOUBLE_EQ(sent, per_crossing) << "host " << h << " NIC " << k;
        }
      }
    EXPECT_DOUBLE_EQ(total, 2 * 2.0 * (n - 1) / n * double(bytes)) << channels << " channels";
    // Every rank sends 2 (n - 1) / n of the buffer in all: over the fabric or a NIC.
    EXPECT_EQ(r.bytes_sent, uint64_t(n) * 2 * (n - 1) * bytes / n);
  }
}

TEST(CclSim, TreeAllReduceSendsEachRanksBufferUpAndDownOnce) {
  const uint64_t floats = 1024;
  Topology t = two_hosts("vendors=cuda", 1);
  SimResult r = run(ccl_schedules(all_reduce(floats), t, CclAlgo::Tree), t);
  EXPECT_EQ(r.transfers, 2u * (8 - 1));
  EXPECT_EQ(r.bytes_sent, 2u * (8 - 1) * floats * 4);
  // Only the two hosts' first ranks cross, once each way: NIC 0 of each host.
  EXPECT_EQ(bytes_on(r, "host0 NIC 0 send"), floats * 4);
  EXPECT_EQ(bytes_on(r, "host1 NIC 0 send"), floats * 4);
  EXPECT_EQ(bytes_on(r, "host0 NIC 1 send"), 0);
}

TEST(CclSim, HierarchicalMovesTheExpectedBytesPerLink) {
  // host0: 4 cuda ranks, host1: 4 hip ranks; groups of g = 4, counterparts on the other host.
  const uint64_t floats = 4 * 2 * 4096, bytes = floats * 4;
  const int g = 4;
  Topology t = two_hosts("host_vendors=cuda:1+hip:1", 2);
  std::vector<Schedule> s = hierarchical(all_reduce(floats), t);
  EXPECT_EQ(s[0].algorithm, "hierarchical_ccl");
  SimResult r = run(s, t);
  for (int rank = 0; rank < 8; ++rank) {
    // Within the group, in its library: a ring reduce-scatter and all-gather, (g-1)/g each.
    EXPECT_DOUBLE_EQ(bytes_on(r, "rank " + std::to_string(rank) + " fabric out"),
                     2.0 * (g - 1) / g * double(bytes))
        << rank;
    EXPECT_DOUBLE_EQ(bytes_on(r, "rank " + std::to_string(rank) + " fabric in"),
                     2.0 * (g - 1) / g * double(bytes))
        << rank;
  }
  // Across the groups: each rank its shard (1/g) to its counterpart, each way, one NIC per rank.
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k) {
      std::string nic = "host" + std::to_string(h) + " NIC " + std::to_string(k);
      EXPECT_DOUBLE_EQ(bytes_on(r, nic + " send"), double(bytes) / g) << nic;
      EXPECT_DOUBLE_EQ(bytes_on(r, nic + " receive"), double(bytes) / g) << nic;
    }
  // The cross-group exchange runs on hmc's executor, the rest in the libraries.
  int hmc_steps = 0;
  for (const Step& st : s[0].steps) hmc_steps += !st.ccl && !st.actions.empty();
  EXPECT_EQ(hmc_steps, 1);
}

TEST(CclSim, HierarchicalOfOneGroupIsTheLibrarysRing) {
  const uint64_t floats = 8 * 4 * 1000;
  Topology t = two_hosts("vendors=cuda", 4);
  SimResult ring = run(ccl_schedules(all_reduce(floats), t, CclAlgo::Ring), t);
  SimResult hier = run(hierarchical(all_reduce(floats), t), t);
  EXPECT_EQ(hier.transfers, ring.transfers);
  EXPECT_EQ(hier.bytes_sent, ring.bytes_sent);
  EXPECT_EQ(hier.resource_bytes, ring.resource_bytes);
  // The same steps, in two calls (reduce-scatter, all-gather) instead of one.
  const CclSpec& lib = t.vendors[size_t(t.vendor_of_rank[0])].ccl;
  EXPECT_NEAR(hier.time_us - ring.time_us, lib.call_us, 1e-6);
}

TEST(CclSim, WhatTheModelHasNoFormForIsRefused) {
  Topology t = two_hosts("vendors=cuda:2+host:2", 1);
  TopologyGroups vg = topology_groups(t);
  Schedule s;
  EXPECT_EQ(make_ccl_schedule(all_reduce(64), t, vg, 2, CclAlgo::Ring, &s), HMC_ERR_NOT_SUPPORTED);
  EXPECT_NE(last_error().find("no collective library"), std::string::npos) << last_error();
  Topology uneven = generate("hosts=2,gpus_per_host=4,vendors=cuda:3+hip:1");
  vg = topology_groups(uneven);
  EXPECT_EQ(make_ccl_schedule(all_reduce(64), uneven, vg, 0, CclAlgo::Ring, &s),
            HMC_ERR_NOT_SUPPORTED);
  EXPECT_NE(last_error().find("differ in size"), std::string::npos) << last_error();
  CollArgs a2a = all_reduce(64);
  a2a.kind = CollKind::AllToAll;
  vg = topology_groups(two_hosts("vendors=cuda", 1));
  EXPECT_EQ(make_ccl_schedule(a2a, two_hosts("vendors=cuda", 1), vg, 0, CclAlgo::Ring, &s),
            HMC_ERR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace hmc::coll

// The collectives' simulator against hand-computed answers: one transfer is latency plus size
// over bandwidth, transfers through one NIC share it, a ring takes n-1 such steps, local copies
// and reductions cost by their rate; malformed schedules are rejected with what is wrong.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "coll/simulate.h"
#include "coll/test_schedules.h"
#include "coll/test_topology.h"
#include "coll/topology.h"
#include "util/status.h"

namespace hmc::coll {
namespace {

using test::local;
using test::parse;
using test::recv_from;
using test::send_to;

// `hosts` hosts of `per_host` host-memory ranks, each host with `nics` NICs of 8 Gb/s (one byte
// per nanosecond) and 2 us latency; shared memory at 16 Gb/s, 1 us.
Topology cluster(int hosts, int per_host, int nics = 1) {
  std::string ranks, nic_list, host_list;
  for (int i = 0; i < per_host; ++i) ranks += std::string(i ? "," : "") + "\"host\"";
  for (int i = 0; i < nics; ++i)
    nic_list += std::string(i ? "," : "") + R"({"gbps": 8, "latency_us": 2})";
  return parse(R"({"paths": {"shared_memory": {"gbps": 16, "latency_us": 1}},
                   "vendors": {"host": {"copy_gbps": 32, "reduce_gbps": 4, "op_latency_us": 0.5}},
                   "hosts": [{"repeat": )" +
               std::to_string(hosts) + R"(, "ranks": [)" + ranks + R"(], "nics": [)" + nic_list +
               "]}]}");
}

SimResult run(const std::vector<Schedule>& s, const Topology& t) {
  SimResult r;
  EXPECT_EQ(simulate(s, t, &r), HMC_SUCCESS) << last_error();
  return r;
}

Schedule steps(std::vector<std::vector<Action>> list) {
  Schedule s;
  for (auto& actions : list) s.steps.push_back(Step{std::move(actions)});
  return s;
}

TEST(CollSimulate, OneSendIsLatencyPlusSizeOverBandwidth) {
  Topology t = cluster(2, 1);
  SimResult r = run({steps({{send_to(1, 1000000)}}), steps({{recv_from(0, 1000000)}})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 1000);  // 2 us + 10^6 bytes at 1 byte/ns
  EXPECT_EQ(r.transfers, 1u);
  EXPECT_EQ(r.bytes_sent, 1000000u);
}

TEST(CollSimulate, ZeroBytesCostTheLatency) {
  Topology t = cluster(2, 1);
  SimResult r = run({steps({{send_to(1, 0)}}), steps({{recv_from(0, 0)}})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 2);
}

TEST(CollSimulate, TwoSendsThroughOneNicShareIt) {
  // Ranks 0 and 1 on host 0 send to ranks 2 and 3 on host 1 at once.
  std::vector<Schedule> s = {steps({{send_to(2, 1000000)}}), steps({{send_to(3, 1000000)}}),
                             steps({{recv_from(0, 1000000)}}), steps({{recv_from(1, 1000000)}})};
  SimResult r = run(s, cluster(2, 2));
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 2000);
  EXPECT_EQ(r.bottleneck, "host0 NIC 0 send");
  EXPECT_DOUBLE_EQ(r.bottleneck_us, 2000);
  // With a NIC per rank they do not meet.
  r = run(s, cluster(2, 2, 2));
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 1000);
  EXPECT_DOUBLE_EQ(r.bottleneck_us, 1000);
}

TEST(CollSimulate, AFlowSpeedsUpWhenItsNeighbourEnds) {
  // 0 -> 2 sends 1 MB, 1 -> 3 sends 3 MB through the same NICs: both at half rate until the
  // first ends (2 ms), then the second alone: 2 MB left at full rate.
  std::vector<Schedule> s = {steps({{send_to(2, 1000000)}}), steps({{send_to(3, 3000000)}}),
                             steps({{recv_from(0, 1000000)}}), steps({{recv_from(1, 3000000)}})};
  SimResult r = run(s, cluster(2, 2));
  EXPECT_DOUBLE_EQ(r.rank_end_us[0], 2 + 2000);
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 2000 + 2000);
}

TEST(CollSimulate, StepsRunInOrderPerRank) {
  // Two steps of one send each: twice one send.
  Topology t = cluster(2, 1);
  SimResult r = run({steps({{send_to(1, 1000)}, {send_to(1, 1000)}}),
                     steps({{recv_from(0, 1000)}, {recv_from(0, 1000)}})},
                    t);
  EXPECT_DOUBLE_EQ(r.time_us, 2 * (2 + 1));
}

TEST(CollSimulate, ATransferWaitsForTheLaterPost) {
  // Rank 1 first copies locally for 0.5 us + 32000 bytes at 4 bytes/ns = 8.5 us, then receives.
  Topology t = cluster(2, 1);
  SimResult r = run({steps({{}, {send_to(1, 1000)}}),
                     steps({{local(ActionKind::Copy, 32000)}, {recv_from(0, 1000)}})},
                    t);
  EXPECT_DOUBLE_EQ(r.time_us, 8.5 + 2 + 1);
}

TEST(CollSimulate, FourRankRingAllGather) {
  // One rank per host: the first step copies the rank's own block (0.5 us + b/4 ns), then three
  // steps of one send and one receive each, each over its own NICs: 3 x (2 us + b ns).
  const uint64_t b = 100000;
  SimResult r = run(test::ring_all_gather(4, b), cluster(4, 1));
  EXPECT_DOUBLE_EQ(r.time_us, 0.5 + b / 4000.0 + 3 * (2 + b / 1000.0));
  EXPECT_EQ(r.transfers, 12u);
  EXPECT_EQ(r.local_ops, 4u);
  // On one host the same ring goes through shared memory, 2 bytes/ns and 1 us.
  r = run(test::ring_all_gather(4, b), cluster(1, 4));
  EXPECT_DOUBLE_EQ(r.time_us, 0.5 + b / 4000.0 + 3 * (1 + b / 2000.0));
}

TEST(CollSimulate, RecvReduceDrainsAtTheReductionRate) {
  // The host reduces at 4 Gb/s = 0.5 bytes/ns, slower than the NIC.
  Topology t = cluster(2, 1);
  SimResult r = run(
      {steps({{send_to(1, 1000000)}}), steps({{recv_from(0, 1000000, 0, ActionKind::RecvReduce)}})},
      t);
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 2000);
  r = run({steps({{local(ActionKind::Reduce, 1000000)}}), steps({})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 0.5 + 2000);
  EXPECT_EQ(r.bottleneck, "rank 0 reduction");
}

TEST(CollSimulate, PairwiseAllToAllAcrossTwoHosts) {
  // 8 ranks, 4 per host, one NIC each. Host 0's NIC sends 16 blocks in all (4 ranks, 4 peers
  // on host 1): a lower bound. No rank has more than one send in flight, so a NIC carries at
  // most 4 at once and every step ends within 2 us + 4 blocks of its last rank starting it.
  const uint64_t b = 1000000;
  SimResult r = run(test::pairwise_all_to_all(8, b), cluster(2, 4));
  EXPECT_EQ(r.transfers, 56u);
  EXPECT_GE(r.time_us, 16 * b / 1000.0);
  EXPECT_LE(r.time_us, 7 * (2 + 4 * b / 1000.0));
  // One rank per host: no sharing, n-1 steps of one transfer.
  r = run(test::pairwise_all_to_all(8, b), cluster(8, 1));
  EXPECT_DOUBLE_EQ(r.time_us, 7 * (2 + b / 1000.0));
}

TEST(CollSimulate, DevicePathsWithinAHost) {
  // cuda to cuda by device IPC, cuda to hip staged (through host memory, limited to 80 Gb/s
  // for the host), with the pair's own link for cuda and hip.
  Topology t = parse(R"({
    "paths": {"device_ipc": {"gbps": 800, "latency_us": 3}, "staged": {"gbps": 160, "latency_us": 10}},
    "pairs": [{"vendors": ["hip", "cuda"], "path": "staged", "gbps": 80, "latency_us": 12}],
    "vendors": {"cuda": {}, "hip": {}},
    "hosts": [{"ranks": ["cuda", "cuda", "hip"]}]})");
  SimResult r =
      run({steps({{send_to(1, 1000000)}}), steps({{recv_from(0, 1000000)}}), steps({})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 3 + 10);  // 100 bytes/ns
  r = run({steps({{send_to(2, 1000000)}}), steps({}), steps({{recv_from(0, 1000000)}})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 12 + 100);  // 10 bytes/ns
  EXPECT_EQ(r.bottleneck, "rank 0 staged out");
  EXPECT_DOUBLE_EQ(r.bottleneck_us, 50);  // the port at 160 Gb/s; the pair's link is slower
}

TEST(CollSimulate, HostMemoryIsShared) {
  // Two host ranks on a host memory of 16 Gb/s (2 bytes/ns): a shared-memory transfer 0 -> 1
  // (1 us latency) and a local copy on rank 1 in the same step. The copy runs alone for the
  // first microsecond (2000 bytes), then both at 1 byte/ns until the copy ends (999 us), then
  // the transfer's last 2000 bytes alone: 2 MB through the memory in 1000 us.
  // (single_copy_bytes 0: every message by the two-copy ring.)
  Topology t = parse(R"({"paths": {"shared_memory": {"gbps": 64, "latency_us": 1,
                                                     "single_copy_bytes": 0}},
                         "vendors": {"host": {"copy_gbps": 64}},
                         "hosts": [{"ranks": ["host", "host"], "memory_gbps": 16}]})");
  SimResult r = run({steps({{send_to(1, 1000000)}}),
                     steps({{recv_from(0, 1000000), local(ActionKind::Copy, 1000000)}})},
                    t);
  EXPECT_DOUBLE_EQ(r.time_us, 1000);
  EXPECT_EQ(r.bottleneck, "host0 memory");
  EXPECT_DOUBLE_EQ(r.bottleneck_us, 1000);
  // Without the copy, the transfer alone: 1 us + 1 MB at 2 bytes/ns.
  r = run({steps({{send_to(1, 1000000)}}), steps({{recv_from(0, 1000000)}})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 1 + 500);
}

TEST(CollSimulate, ExecutorStepCostAndOversubscribedCores) {
  // Four host ranks exchange 1 MB in pairs (0 <-> 1, 2 <-> 3) in one step: four shared-memory
  // transfers, each link 64 Gb/s (8 bytes/ns), 1 us latency. Every step costs 10 us plus 5 us
  // per transfer posted (two per rank): 20 us before anything moves. Every message by the
  // two-copy ring (single_copy_bytes 0).
  std::string head = R"({"paths": {"shared_memory": {"gbps": 64, "latency_us": 1,
                                                     "single_copy_bytes": 0}},
                         "executor": {"step_us": 10, "transfer_us": 5},
                         "hosts": [{"ranks": ["host", "host", "host", "host"])";
  std::vector<Schedule> s;
  for (int r = 0; r < 4; ++r)
    s.push_back(steps({{send_to(r ^ 1, 1000000), recv_from(r ^ 1, 1000000)}}));
  SimResult r = run(s, parse(head + "}]}"));
  EXPECT_DOUBLE_EQ(r.time_us, 20 + 1 + 125);
  // Two cores for four ranks: the software costs twice as long; the CPUs, each moving 4 bytes/ns
  // (32 Gb/s), carry the four transfers together at 8 bytes/ns, 2 each.
  r = run(s, parse(head + R"(, "cores": 2, "cpu_gbps": 32}]})"));
  EXPECT_DOUBLE_EQ(r.time_us, 40 + 1 + 500);
  EXPECT_EQ(r.bottleneck, "host0 CPU");
  // As many cores as ranks: no slowdown of the software; the CPUs no longer the bottleneck.
  r = run(s, parse(head + R"(, "cores": 4, "cpu_gbps": 64}]})"));
  EXPECT_DOUBLE_EQ(r.time_us, 20 + 1 + 125);
}

TEST(CollSimulate, SingleCopySharedMemory) {
  // The pairs of the test above with messages over the single-copy threshold: one copy a
  // message costs the CPUs half a ring message's, so two cores at 4 bytes/ns each carry the four
  // transfers at 4 bytes/ns each (8 / (4 x 0.5)) instead of 2.
  auto topo = [](const std::string& single) {
    return R"({"paths": {"shared_memory": {"gbps": 64, "latency_us": 1)" + single +
           R"(}}, "executor": {"step_us": 10, "transfer_us": 5},
              "hosts": [{"ranks": ["host", "host", "host", "host"], "cores": 2,
                         "cpu_gbps": 32}]})";
  };
  std::vector<Schedule> s;
  for (int r = 0; r < 4; ++r)
    s.push_back(steps({{send_to(r ^ 1, 1000000), recv_from(r ^ 1, 1000000)}}));
  SimResult r = run(s, parse(topo(R"(, "single_copy_bytes": 16384)")));
  EXPECT_DOUBLE_EQ(r.time_us, 40 + 1 + 250);
  EXPECT_DOUBLE_EQ(r.resource_bytes["host0 CPU"], 4 * 0.5 * 1e6);
  // A message at the threshold still takes the ring: 2 bytes/ns each, as with every size above.
  SimResult ring = run(s, parse(topo(R"(, "single_copy_bytes": 1000000)")));
  EXPECT_DOUBLE_EQ(ring.time_us, 40 + 1 + 500);
  // The single-copy path's own link: one transfer alone at 16 bytes/ns after 3 us.
  Topology one = parse(R"({"paths": {"shared_memory": {"gbps": 64, "latency_us": 1,
                            "single_copy_gbps": 128, "single_copy_latency_us": 3}},
                            "hosts": [{"ranks": ["host", "host"]}]})");
  EXPECT_DOUBLE_EQ(
      run({steps({{send_to(1, 1000000)}}), steps({{recv_from(0, 1000000)}})}, one).time_us,
      3 + 62.5);
  // Below the (default 16 KiB) threshold: the ring's link.
  EXPECT_DOUBLE_EQ(run({steps({{send_to(1, 8000)}}), steps({{recv_from(0, 8000)}})}, one).time_us,
                   1 + 1);
  Topology g;
  ASSERT_EQ(generate_topology("hosts=1,shm_single_copy_bytes=0,shm_single_copy_gbps=99", &g),
            HMC_SUCCESS);
  EXPECT_EQ(g.shm_single_copy.bytes, 0u);
  EXPECT_EQ(g.shm_single_copy.link.gbps, 99);
}

TEST(CollSimulate, NetworkStagingWithoutGpuDirect) {
  Topology t = parse(R"({
    "vendors": {"mlu": {"gpudirect": false, "copy_gbps": 4}},
    "hosts": [{"repeat": 2, "ranks": ["mlu"], "nics": [{"gbps": 8, "latency_us": 2}]}]})");
  SimResult r = run({steps({{send_to(1, 1000000)}}), steps({{recv_from(0, 1000000)}})}, t);
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 2000);  // the device-host copies at 0.5 bytes/ns
}

void expect_rejected(const std::vector<Schedule>& s, const Topology& t, const std::string& what) {
  SimResult r;
  EXPECT_EQ(simulate(s, t, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find(what), std::string::npos) << last_error();
}

TEST(CollSimulate, MalformedSchedulesAreRejected) {
  Topology t = cluster(2, 1);
  expect_rejected({steps({{send_to(1, 10)}}), steps({{}})}, t,
                  "rank 0, step 0: Send of 10 bytes to rank 1 (its 1st to that rank in the "
                  "step) has no matching Recv on rank 1 in step 0");
  expect_rejected({steps({{}}), steps({{recv_from(0, 10)}})}, t,
                  "rank 1, step 0: Recv of 10 bytes from rank 0 (its 1st from that rank in the "
                  "step) has no matching Send on rank 0 in step 0");
  expect_rejected({steps({{send_to(1, 10)}}), steps({{recv_from(0, 12)}})}, t,
                  "rank 0 sends 10 bytes to rank 1 (its 1st Send to it in the step) but rank 1 "
                  "receives 12 bytes");
  // The same pair in different steps does not match (the executor tags by step).
  expect_rejected({steps({{send_to(1, 10)}}), steps({{}, {recv_from(0, 10)}})}, t,
                  "no matching Recv on rank 1 in step 0");
  // Two sends, one receive: the second send has none.
  expect_rejected({steps({{send_to(1, 10), send_to(1, 10)}}), steps({{recv_from(0, 10)}})}, t,
                  "(its 2nd to that rank in the step)");
  expect_rejected({steps({{send_to(5, 10)}}), steps({})}, t, "Send with peer 5");
  expect_rejected({steps({{send_to(0, 10)}}), steps({})}, t, "Send with peer 0");
  expect_rejected({steps({})}, t, "1 schedules for a topology of 2 ranks");
}

TEST(CollSimulate, PairsMatchInOrder) {
  // Two sends of different sizes to one peer, received in the same order.
  Topology t = cluster(2, 1);
  SimResult r = run({steps({{send_to(1, 1000), send_to(1, 3000)}}),
                     steps({{recv_from(0, 1000), recv_from(0, 3000)}})},
                    t);
  EXPECT_EQ(r.transfers, 2u);
  EXPECT_DOUBLE_EQ(r.time_us, 2 + 4);  // they share the NIC: 1000 B at half rate, then 2000 B
}

TEST(CollSimulate, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollKind::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollKind::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollKind::ReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(busbw_factor(CollKind::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CollKind::Broadcast, 16), 1.0);
  EXPECT_EQ(algbw_bytes(CollKind::AllReduce, 100, 4, 8), 400u);
  EXPECT_EQ(algbw_bytes(CollKind::AllGather, 100, 4, 8), 3200u);
  EXPECT_EQ(algbw_bytes(CollKind::AllToAll, 100, 2, 8), 1600u);
}

TEST(CollSimulate, ThousandRankPairwiseAllToAll) {
  // About a million transfers: the size the simulator is for. Host 0's NIC carries 8 x 1016
  // blocks, a lower bound on the time.
  Topology t;
  ASSERT_EQ(generate_topology("hosts=128,gpus_per_host=8,vendors=cuda:4+hip:4,nic_gbps=400", &t),
            HMC_SUCCESS)
      << last_error();
  const uint64_t b = 65536;
  std::vector<Schedule> s = test::pairwise_all_to_all(1024, b);
  auto begin = std::chrono::steady_clock::now();
  SimResult r = run(s, t);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(r.transfers, 1024u * 1023u);
  EXPECT_GE(r.time_us, 8 * 1016 * b / 50000.0);
  RecordProperty("simulate_seconds", std::to_string(seconds));
  std::printf(
      "1024-rank pairwise all-to-all: %.1f us predicted, simulated in %.2f s, %llu events\n",
      r.time_us, seconds, static_cast<unsigned long long>(r.events));
}

}  // namespace
}  // namespace hmc::coll

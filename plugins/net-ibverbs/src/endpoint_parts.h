// What the files of Endpoint (endpoint.cpp and endpoint_*.cpp, one concern each) share: the
// queue and rendezvous bounds, the port weight of striping, stage names, which completion
// statuses are a refused access, and making a queue pair. Internal to the plugin.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "context.h"
#include "endpoint.h"

namespace hmc::ibverbs {

constexpr uint32_t kSqDepth = 128;
constexpr int kMaxRdmaInFlight = 16;  // pieces of RDMA READ/WRITE per queue pair at once
// A rendezvous buffer the plugin registers goes in segments of this size (at least HMC_IB_CHUNK),
// at most kRndvWindow of them registered ahead of what the reader has read: registering 512 MiB
// takes seconds under emulation, a segment a fraction of it.
constexpr size_t kRndvSegment = size_t{16} << 20;
constexpr size_t kRndvWindow = 4;
// Vectored pieces are posted in chains (Endpoint::pump_chained) of up to kMaxChain work
// requests, within the same kMaxRdmaInFlight as single pieces: two chains in flight keep the
// queue pair busy while the older one's completion comes back.
constexpr size_t kMaxChain = kMaxRdmaInFlight / 2;

// A port's share of striped bytes: its link rate (at least 1).
inline uint64_t port_weight(const Device& d) {
  return std::max<uint64_t>(
      1, port_bandwidth_MBps(d.info().attr.active_speed, d.info().attr.active_width));
}

inline const char* stage_name(Endpoint::Stage s) {
  switch (s) {
    case Endpoint::Stage::kDialing: return "connecting";
    case Endpoint::Stage::kHelloSent: return "waiting for the listener";
    case Endpoint::Stage::kAwaitReady: return "waiting for the connector";
    case Endpoint::Stage::kReady: return "ready";
    case Endpoint::Stage::kLost: return "lost";
  }
  return "?";
}

inline bool refused_access(ibv_wc_status s) {
  return s == IBV_WC_REM_ACCESS_ERR || s == IBV_WC_REM_INV_REQ_ERR || s == IBV_WC_REM_OP_ERR ||
         s == IBV_WC_LOC_PROT_ERR || s == IBV_WC_LOC_ACCESS_ERR;
}

// A reliable-connection queue pair on d, in INIT (endpoint_qp.cpp); nullptr when the device
// refuses one.
ibv_qp* make_qp(Device& d);

}  // namespace hmc::ibverbs

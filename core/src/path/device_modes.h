// How a message of device memory that the net path cannot reach crosses to a peer, chosen by a
// cost model from both sides' copy figures and the pair's net path (framed/pieces.cpp, ipc.cpp and
// shared_bounces.cpp carry out each way):
//   - device IPC: the receiver maps the sender's allocation and copies device to device, once
//     (same host, other process, both sides' plugin of that vendor IPC-capable);
//   - shared bounces: one copy out of the sender's device into pinned buffers the receiver maps,
//     one copy from there into the receiver's device, pipelined (same host, other process);
//   - transport: the same two copies with the net path between them, pipelined.
//
// Each way's expected time for a message of `size` bytes is latency + size / bandwidth, with
//   bandwidth: IPC the device-to-device copy rate (the slower side's figure for the vendor);
//              shared min(sender's device-to-host, receiver's host-to-device);
//              transport min(sender's device-to-host, net path, receiver's host-to-device);
//   latency:   the net path's latency for the header (and for IPC and shared the reply), plus,
//              for the two pipelined ways, the fill and drain of the pipeline: one piece's copy
//              out before the first piece can move and one piece's copy in after the last.
// The receiver's host-to-device figure is its slowest device plugin's (the sender does not know
// which of its devices a message lands in); a receiver without device memory copies nothing in.
// Figures come from the plugin's declaration (hmc_device_props_t.copy_bandwidth_MBps), else
// from a short measurement of the context's own copies (device/copy_figures.h), else the
// defaults below. Ways within kModeTieBand of the cheapest are a tie, won by the one with fewer
// copies (IPC, then shared, then transport): the figures come from a few milliseconds of copies
// on a machine that may be busy (they vary by tens of percent), and a copy fewer also spares
// host memory bandwidth, so a way with more copies must be clearly faster to be chosen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hmc::path {

// One device plugin's copy figures on one side, MB/s; 0: unknown.
struct CopyRecord {
  std::string plugin;
  uint64_t d2h_MBps = 0;
  uint64_t h2d_MBps = 0;
  uint64_t d2d_MBps = 0;
};

enum class DeviceMode : uint8_t { Ipc, Shared, Transport };
const char* mode_name(DeviceMode m);

// Figure assumed for a copy rate nobody declared or measured (a PCIe 4 x16 link's order).
constexpr double kDefaultCopyMBps = 20000.0;
constexpr double kModeTieBand = 1.5;

struct ModeCost {
  DeviceMode mode = DeviceMode::Transport;
  double bandwidth_MBps = 0;
  double latency_us = 0;
  double cost_us(uint64_t size) const {
    return latency_us + static_cast<double>(size) / bandwidth_MBps;  // MB/s == bytes/us
  }
};

// What the model needs about one peer pair, for messages from one local device plugin.
struct ModeInputs {
  CopyRecord local;                // the sender's figures for the plugin of the message's memory
  std::vector<CopyRecord> remote;  // the receiver's figures, one per device plugin it has
  bool ipc = false;                // device IPC agreed for this plugin
  bool shared = false;             // shared bounces agreed
  double net_bandwidth_MBps = 0;   // the pair's net path (path::Choice)
  double net_latency_us = 0;
  uint64_t chunk = 0;  // the pair's piece size
};

// The ways open to the pair for the plugin, with their figures (unordered).
std::vector<ModeCost> device_mode_costs(const ModeInputs& in);

// The order to try the ways in for a message of `size` bytes, cheapest first (ties as above).
// Writes at most 3 modes into out and returns how many.
int rank_device_modes(const std::vector<ModeCost>& costs, uint64_t size, DeviceMode out[3]);

// One line for logs and hmc-info: "IPC 21000 MB/s, shared 9000 MB/s, transport 3000 MB/s".
std::string describe_modes(const std::vector<ModeCost>& costs, uint64_t size);

}  // namespace hmc::path

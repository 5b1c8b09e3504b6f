#include "peer/messages.h"

#include "hmc/plugin/net.h"

namespace hmc::msg {
namespace {
constexpr size_t kMaxName = 256;
constexpr size_t kMaxText = 4096;
constexpr uint32_t kMaxNetRecords = 256;
constexpr uint32_t kMaxDevicePlugins = 64;
}  // namespace

void encode_caps(const path::Capabilities& caps, control::Writer* w) {
  w->u32(kCapsMagic);
  w->u16(kCapsVersion);
  w->str(caps.host_id);
  w->str(caps.hostname);
  w->i32(caps.pid);
  w->u64(caps.context_id);
  w->u64(caps.stage_chunk);
  w->u64(caps.stage_first);
  w->u32(caps.device_count);
  w->u32(caps.features);
  w->u32(static_cast<uint32_t>(caps.net.size()));
  for (const auto& n : caps.net) {
    w->str(n.plugin);
    w->str(n.device);
    w->str(n.fabric);
    w->u64(n.bandwidth_MBps);
    w->u32(n.latency_ns);
    w->u64(n.measured_bandwidth_MBps);
    w->u32(n.measured_latency_ns);
    w->u64(n.mem_ifaces);
    w->u64(n.rma_mem_ifaces);
    w->u32(n.flags);
    w->u32(n.preference);
    w->u64(n.nic_guid);
    w->u32(n.nic_port);
  }
  w->u32(static_cast<uint32_t>(caps.ipc_plugins.size()));
  for (const auto& p : caps.ipc_plugins) w->str(p);
  w->u32(static_cast<uint32_t>(caps.copy.size()));
  for (const auto& c : caps.copy) {
    w->str(c.plugin);
    w->u64(c.d2h_MBps);
    w->u64(c.h2d_MBps);
    w->u64(c.d2d_MBps);
  }
}

namespace {
CapsDecode read_caps(const uint8_t* p, size_t n_bytes, path::Capabilities* caps) {
  control::Reader r(p, n_bytes);
  path::Capabilities c;
  uint32_t magic = 0, n = 0, m = 0;
  uint16_t version = 0;
  // Records from before the versioned one start with the host id's length (at most 256).
  if (!r.u32(&magic) || magic != kCapsMagic) return CapsDecode::Unversioned;
  if (!r.u16(&version)) return CapsDecode::Malformed;
  if (version != kCapsVersion) return CapsDecode::OtherVersion;
  if (!r.str(&c.host_id, kMaxName) || !r.str(&c.hostname, kMaxName) || !r.i32(&c.pid) ||
      !r.u64(&c.context_id) || !r.u64(&c.stage_chunk) || !r.u64(&c.stage_first) ||
      !r.u32(&c.device_count) || !r.u32(&c.features) || !r.u32(&n) || n > kMaxNetRecords)
    return CapsDecode::Malformed;
  c.net.resize(n);
  for (auto& rec : c.net)
    if (!r.str(&rec.plugin, kMaxName) || !r.str(&rec.device, kMaxName) ||
        !r.str(&rec.fabric, kMaxName) || !r.u64(&rec.bandwidth_MBps) || !r.u32(&rec.latency_ns) ||
        !r.u64(&rec.measured_bandwidth_MBps) || !r.u32(&rec.measured_latency_ns) ||
        !r.u64(&rec.mem_ifaces) || !r.u64(&rec.rma_mem_ifaces) || !r.u32(&rec.flags) ||
        !r.u32(&rec.preference) || !r.u64(&rec.nic_guid) || !r.u32(&rec.nic_port))
      return CapsDecode::Malformed;
  if (!r.u32(&m) || m > kMaxDevicePlugins) return CapsDecode::Malformed;
  c.ipc_plugins.resize(m);
  for (auto& name : c.ipc_plugins)
    if (!r.str(&name, kMaxName)) return CapsDecode::Malformed;
  if (!r.u32(&m) || m > kMaxDevicePlugins) return CapsDecode::Malformed;
  c.copy.resize(m);
  for (auto& x : c.copy)
    if (!r.str(&x.plugin, kMaxName) || !r.u64(&x.d2h_MBps) || !r.u64(&x.h2d_MBps) ||
        !r.u64(&x.d2d_MBps))
      return CapsDecode::Malformed;
  // Every field is required, and nothing follows them: a later layout is another version.
  if (r.remaining() != 0) return CapsDecode::Malformed;
  *caps = std::move(c);
  return CapsDecode::Ok;
}
}  // namespace

bool decode_caps(const uint8_t* p, size_t n_bytes, path::Capabilities* caps, CapsDecode* why) {
  CapsDecode d = read_caps(p, n_bytes, caps);
  if (why) *why = d;
  return d == CapsDecode::Ok;
}

const char* caps_decode_text(CapsDecode d) {
  switch (d) {
    case CapsDecode::Ok: return "well formed";
    case CapsDecode::Unversioned:
      return "a capability record from before version 2 (an older hmc, which this build does "
             "not speak to)";
    case CapsDecode::OtherVersion:
      return "a capability record of another version than 2, the one this build reads";
    case CapsDecode::Malformed: return "a malformed capability record";
  }
  return "?";
}

void encode_net_handle(const NetHandle& m, control::Writer* w) {
  w->i32(m.status);
  w->str(m.text);
  w->str(m.plugin);
  w->str(m.device);
  w->blob(m.handle);
  w->u8(m.flags);
  w->str(m.peer_device);
}

bool decode_net_handle(const uint8_t* p, size_t n, NetHandle* m) {
  control::Reader r(p, n);
  NetHandle h;
  if (!r.i32(&h.status) || !r.str(&h.text, kMaxText) || !r.str(&h.plugin, kMaxName) ||
      !r.str(&h.device, kMaxName) || !r.blob(&h.handle, HMC_NET_HANDLE_MAX))
    return false;
  if (!r.u8(&h.flags) || !r.str(&h.peer_device, kMaxName) || r.remaining() != 0) return false;
  *m = std::move(h);
  return true;
}

void encode_net_hello(const NetHello& m, control::Writer* w) {
  w->blob(m.hello);
}

bool decode_net_hello(const uint8_t* p, size_t n, NetHello* m) {
  control::Reader r(p, n);
  NetHello h;
  if (!r.blob(&h.hello, HMC_NET_HELLO_MAX)) return false;
  *m = std::move(h);
  return true;
}

void encode_net_ready(const NetReady& m, control::Writer* w) {
  w->i32(m.status);
  w->str(m.text);
}

bool decode_net_ready(const uint8_t* p, size_t n, NetReady* m) {
  control::Reader r(p, n);
  NetReady x;
  if (!r.i32(&x.status) || !r.str(&x.text, kMaxText)) return false;
  *m = std::move(x);
  return true;
}

void encode_notify(const Notify& m, control::Writer* w) {
  w->u64(m.value);
  w->u64(m.carried_before);
  w->str(m.bytes);
}
bool decode_notify(const uint8_t* p, size_t n, Notify* m) {
  control::Reader r(p, n);
  Notify x;
  if (!r.u64(&x.value) || !r.u64(&x.carried_before) || !r.str(&x.bytes, HMC_NOTIFY_MAX_BYTES))
    return false;
  *m = std::move(x);
  return true;
}

void encode_notify_ack(const uint64_t& delivered, control::Writer* w) {
  w->u64(delivered);
}
bool decode_notify_ack(const uint8_t* p, size_t n, uint64_t* delivered) {
  control::Reader r(p, n);
  return r.u64(delivered);
}

void encode_bye(const std::string& reason, control::Writer* w) {
  w->str(reason);
}
bool decode_bye(const uint8_t* p, size_t n, std::string* reason) {
  control::Reader r(p, n);
  return r.str(reason, kMaxText);
}

void encode_region_request(const RegionRequest& m, control::Writer* w) {
  w->u64(m.token);
  w->u64(m.context_id);
  w->u64(m.region_id);
  w->u64(m.base);
  w->u64(m.size);
  w->u32(m.access);
}

bool decode_region_request(const uint8_t* p, size_t n, RegionRequest* m) {
  control::Reader r(p, n);
  RegionRequest x;
  if (!r.u64(&x.token) || !r.u64(&x.context_id) || !r.u64(&x.region_id) || !r.u64(&x.base) ||
      !r.u64(&x.size) || !r.u32(&x.access))
    return false;
  *m = x;
  return true;
}

void encode_region_reply(const RegionReply& m, control::Writer* w) {
  w->u64(m.token);
  w->u64(m.region_id);
  w->i32(m.status);
  w->str(m.text);
}

bool decode_region_reply(const uint8_t* p, size_t n, RegionReply* m) {
  control::Reader r(p, n);
  RegionReply x;
  if (!r.u64(&x.token) || !r.u64(&x.region_id) || !r.i32(&x.status) || !r.str(&x.text, kMaxText))
    return false;
  *m = std::move(x);
  return true;
}

void encode_region_id(const uint64_t& region_id, control::Writer* w) {
  w->u64(region_id);
}
bool decode_region_id(const uint8_t* p, size_t n, uint64_t* region_id) {
  control::Reader r(p, n);
  return r.u64(region_id);
}

void encode_staged_ask(const StagedAsk& m, control::Writer* w) {
  w->u64(m.tag);
  w->u64(m.region_id);
  w->u64(m.offset);
  w->u64(m.size);
}

bool decode_staged_ask(const uint8_t* p, size_t n, StagedAsk* m) {
  control::Reader r(p, n);
  StagedAsk x;
  if (!r.u64(&x.tag) || !r.u64(&x.region_id) || !r.u64(&x.offset) || !r.u64(&x.size)) return false;
  *m = x;
  return true;
}

void encode_staged_done(const StagedDone& m, control::Writer* w) {
  w->u64(m.tag);
  w->i32(m.status);
  w->str(m.text);
}

bool decode_staged_done(const uint8_t* p, size_t n, StagedDone* m) {
  control::Reader r(p, n);
  StagedDone x;
  if (!r.u64(&x.tag) || !r.i32(&x.status) || !r.str(&x.text, kMaxText)) return false;
  *m = std::move(x);
  return true;
}

}  // namespace hmc::msg

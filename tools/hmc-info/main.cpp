// hmc-info: what hmc found on this machine, and why not. Lists the plugins (loaded, or skipped
// with the reason), the devices, the net devices with all their properties, and with --config
// every HMC_ variable with its value, default and meaning. --json gives the same as one JSON
// object; --config --format markdown gives the variables as the Markdown tables of
// docs/configuration.md. It creates a context without a progress thread and never connects
// anywhere; --calibrate measures the net devices that declare no figures, over loopback in this
// process, and the device plugins' copy rates.
#include <hmc/hmc.h>
#include <hmc/plugin/device.h>
#include <hmc/plugin/net.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "config_markdown.h"
#include "json.h"

namespace {

using hmc_tools::Json;
using hmc_tools::or_null;

const char* kAbout =
    "Shows what hmc found: its version, the plugins (loaded, or skipped and why), the devices "
    "and the net devices with their properties.";
const char* kFooter =
    "exit status: 0 success, 1 hmc failed (the message says why), 2 bad arguments, 3 a plugin "
    "named by --require did not load";

enum class Format { Text, Json, Markdown };

struct Args {
  bool config = false;
  Format format = Format::Text;
  bool calibrate = false;
  std::vector<std::string> require;
};

// The names of --require that no loaded plugin answers to, each with why it is missing. A device
// plugin that loaded without a device (its runtime missing, or no device present) does not
// count: what a deployment requires of "cuda" is CUDA devices.
std::vector<std::string> missing_plugins(const std::vector<std::string>& required,
                                         const std::vector<hmc_plugin_info_t>& plugins,
                                         const std::vector<hmc_device_info_t>& devices) {
  std::vector<std::string> out;
  for (const std::string& name : required) {
    std::string why =
        "did not load: no plugin of that name was found (see HMC_PLUGIN_PATH in "
        "hmc-info --config)";
    bool ready = false;
    for (const auto& p : plugins) {
      if (name != p.name) continue;
      bool has_device = p.kind != HMC_PLUGIN_KIND_DEVICE ||
                        std::any_of(devices.begin(), devices.end(),
                                    [&](const hmc_device_info_t& d) { return name == d.plugin; });
      if (p.loaded && has_device)
        ready = true;
      else if (p.loaded)
        why = std::string("loaded with no device") +
              (p.reason[0] ? " (" + std::string(p.reason) + ")" : "");
      else
        why = "did not load: " + std::string(p.reason);
    }
    if (!ready) out.push_back("required plugin '" + name + "' " + why);
  }
  return out;
}

// Names of set bits; unknown bits as hex so nothing is silently dropped.
struct BitName {
  uint64_t bit;
  const char* name;
};

std::vector<std::string> bit_names(uint64_t v, const std::vector<BitName>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (v & n.bit) {
      out.push_back(n.name);
      v &= ~n.bit;
    }
  if (v != 0) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%" PRIx64, v);
    out.push_back(b);
  }
  return out;
}

const std::vector<BitName> kDeviceCaps = {
    {HMC_DEVICE_CAP_IPC, "ipc"},
    {HMC_DEVICE_CAP_DMABUF, "dma-buf"},
    {HMC_DEVICE_CAP_PEER_ACCESS, "peer-access"},
    {HMC_DEVICE_CAP_HOST_REGISTER, "host-register"},
    {HMC_DEVICE_CAP_GPUDIRECT_RDMA, "gpudirect-rdma"},
    {HMC_DEVICE_CAP_IPC_UNIQUE_HANDLES, "ipc-unique-handles"},
};
const std::vector<BitName> kMemIfaces = {
    {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST), "host"},
    {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA), "cuda"},
    {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM), "rocm"},
    {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_MLU), "mlu"},
    {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_MUSA), "musa"},
};
const std::vector<BitName> kNetFlags = {
    {HMC_NET_FLAG_RMA, "rma (put/get)"},
    {HMC_NET_FLAG_TAGGED, "tagged (send/recv)"},
    {HMC_NET_FLAG_SAME_HOST, "same-host only"},
    {HMC_NET_FLAG_NEEDS_REG, "needs registered buffers"},
    {HMC_NET_FLAG_DMABUF, "dma-buf registration"},
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += sep;
    s += x;
  }
  return s;
}

std::string bytes_text(uint64_t n) {
  char b[64];
  if (n >= (1ull << 30))
    std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(n) / (1ull << 30));
  else if (n >= (1ull << 20))
    std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(n) / (1ull << 20));
  else if (n >= (1ull << 10))
    std::snprintf(b, sizeof b, "%.1f KiB", static_cast<double>(n) / (1ull << 10));
  else
    std::snprintf(b, sizeof b, "%" PRIu64 " B", n);
  return b;
}

std::string uuid_text(const uint8_t u[16]) {
  bool zero = true;
  for (int i = 0; i < 16; ++i) zero = zero && u[i] == 0;
  if (zero) return "";
  char b[40];
  std::snprintf(b, sizeof b, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                u[13], u[14], u[15]);
  return b;
}

// Fixed-size C strings from the API are NUL-terminated by contract; bound the read anyway.
template <size_t N>
std::string str(const char (&a)[N]) {
  return std::string(a, strnlen(a, N));
}

// A net device's details (hmc.h): lines "name: value"; a line without the separator is a value
// without a name.
std::vector<std::pair<std::string, std::string>> detail_lines(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const size_t sep = line.find(": ");
    if (sep == std::string::npos)
      out.emplace_back("", line);
    else
      out.emplace_back(line.substr(0, sep), line.substr(sep + 2));
  }
  return out;
}

// As a JSON list of {"name", "value"} in the plugin's order (names repeat across plugins' styles).
Json json_details(const std::string& text) {
  Json list = Json::array();
  for (const auto& [name, value] : detail_lines(text))
    list.push_back({{"name", name.empty() ? Json(nullptr) : Json(name)}, {"value", value}});
  return list;
}

// The error of the call that just failed, as one line.
std::string failure(const char* call, hmc_status_t s) {
  std::string m = std::string(call) + ": " + hmc_status_string(s);
  const char* e = hmc_last_error();
  if (e != nullptr && *e != '\0') m += std::string(": ") + e;
  return m;
}

struct Inventory {
  std::vector<hmc_plugin_info_t> plugins;
  std::vector<hmc_device_info_t> devices;
  std::vector<hmc_net_device_info_t> nets;
  std::vector<std::string> errors;  // a list that could not be read does not hide the others
  std::vector<hmc_config_entry_t> config;
};

// The value in effect of a variable of the context's configuration ("" when not listed).
std::string config_value(const Inventory& inv, const char* name) {
  for (const auto& e : inv.config)
    if (std::strcmp(e.name, name) == 0) return str(e.value);
  return "";
}

// How device memory of each vendor present crosses to a peer, by where the peer is; the choice
// is made per message by the core (docs/protocols-wire.md), and hmc_peer_info says what a peer
// got.
// The nets that move memory of interface iface (-1: none known) to other hosts with no bounce
// buffer, as their properties say. A same-host-only net (HMC_NET_FLAG_SAME_HOST: hoststage/shm,
// UCX's or libfabric's shared memory) never reaches another host, whatever memory it reads.
std::vector<std::string> direct_to_other_hosts(const Inventory& inv, int iface) {
  std::vector<std::string> out;
  for (const auto& n : inv.nets) {
    if (n.flags & HMC_NET_FLAG_SAME_HOST) continue;
    const std::string name = str(n.plugin) + "/" + str(n.name);
    const bool by_pointer = iface >= 0 && (n.mem_ifaces & HMC_MEM_IFACE_BIT(iface));
    if (by_pointer || n.dmabuf) out.push_back(name + (by_pointer ? "" : " (dma-buf)"));
#ifdef HMC_HAS_NET_RMA_MEM_IFACES
    else if (iface >= 0 && (n.rma_mem_ifaces & HMC_MEM_IFACE_BIT(iface)))
      out.push_back(name + " (peermem, puts and gets)");
#endif
  }
  return out;
}

void print_device_paths(const Inventory& inv) {
  std::vector<std::string> vendors;
  for (const auto& d : inv.devices)
    if (!d.is_host && std::find(vendors.begin(), vendors.end(), str(d.plugin)) == vendors.end())
      vendors.push_back(str(d.plugin));
  if (vendors.empty()) return;
  bool ipc_on = config_value(inv, "HMC_DEVICE_IPC") != "0";
  bool shared_on = config_value(inv, "HMC_STAGE_SHARED") != "0";
  std::printf(
      "\ndevice memory to other processes (the way open that ranks first, per message; "
      "small messages always staged):\n");
  for (const auto& v : vendors) {
    std::vector<std::string> ipc_devs;
    for (const auto& d : inv.devices)
      if (str(d.plugin) == v && (d.caps & HMC_DEVICE_CAP_IPC)) ipc_devs.push_back(str(d.name));
    int iface = -1;
    for (const auto& d : inv.devices)
      if (str(d.plugin) == v) iface = d.mem_iface;
    const std::vector<std::string> direct = direct_to_other_hosts(inv, iface);
    std::printf("  %s\n", v.c_str());
#ifdef HMC_HAS_DEVICE_COPY_FIGURES
    for (const auto& d : inv.devices) {
      if (str(d.plugin) != v) continue;
      if (d.copy_basis[0] == '\0') {
        std::printf("    %-31s %s\n", "copy rates",
                    "not measured yet (hmc-info --calibrate measures them)");
      } else {
        std::printf("    %-31s %" PRIu64 " MB/s device to host, %" PRIu64
                    " MB/s host to device, %" PRIu64 " MB/s device to device (%s)\n",
                    "copy rates", d.copy_d2h_MBps, d.copy_h2d_MBps, d.copy_d2d_MBps, d.copy_basis);
        if (d.copy_ways[0] != '\0')
          std::printf("    %-31s %s\n", "ranked, 64 MiB, this host", d.copy_ways);
      }
      break;  // one device stands for its plugin
    }
#endif
    // The ways open; which one a message takes is the cost model's ranking (above, once the
    // copy rates are measured), the same order as here when they are close.
    std::string shared = shared_on
                             ? "shared bounces (one copy out of the sender's device, one into "
                               "the receiver's)"
                             : "";
    std::string ipc = !ipc_on ? "IPC off (HMC_DEVICE_IPC=0)"
                      : ipc_devs.empty()
                          ? "no device can export memory for IPC"
                          : "device IPC, copied device to device (" + join(ipc_devs, ", ") + ")";
    std::string same = "this host, " + v + " memory";
    std::printf("    %-31s %s%s\n", same.c_str(), ipc.c_str(),
                shared_on ? ", or shared bounces, or the net path" : ", or the net path");
    std::printf("    %-31s %s\n", "this host, other device memory",
                shared_on ? (shared + ", or the net path").c_str()
                          : "staged through the net path (HMC_STAGE_SHARED=0)");
    std::printf("    %-31s %s\n", "other hosts",
                direct.empty() ? "staged: pinned bounces pipelined with the net path"
                               : ("direct on " + join(direct, ", ") + ", else staged").c_str());
  }
}

template <typename T, typename CountFn, typename InfoFn>
void read_list(hmc_context_t ctx, CountFn count_fn, InfoFn info_fn, const char* what,
               std::vector<T>* out, std::vector<std::string>* errors) {
  int n = 0;
  hmc_status_t s = count_fn(ctx, &n);
  if (s != HMC_SUCCESS) {
    errors->push_back(failure(what, s));
    return;
  }
  for (int i = 0; i < n; ++i) {
    T v{};
    v.struct_size = sizeof(T);
    s = info_fn(ctx, i, &v);
    if (s != HMC_SUCCESS) {
      errors->push_back(failure(what, s));
      continue;
    }
    out->push_back(v);
  }
}

const char* kind_text(hmc_plugin_kind_t k) {
  return k == HMC_PLUGIN_KIND_DEVICE ? "device"
         : k == HMC_PLUGIN_KIND_NET  ? "net"
         : k == HMC_PLUGIN_KIND_CCL  ? "ccl"
                                     : "?";
}

void print_text(const Inventory& inv) {
  std::printf("hmc %s (API %d.%d)\n", hmc_version(), HMC_API_VERSION_MAJOR, HMC_API_VERSION_MINOR);

  std::printf("\nplugins (%zu found, in search order):\n", inv.plugins.size());
  if (inv.plugins.empty()) std::printf("  none (see HMC_PLUGIN_PATH in hmc-info --config)\n");
  for (const auto& p : inv.plugins) {
    std::string abi = p.abi_version ? std::to_string(p.abi_version) : "?";
    std::printf("  %-7s %-6s %-12s abi %-3s %s\n", p.loaded ? "loaded" : "skipped",
                kind_text(p.kind), p.name, abi.c_str(), p.path);
    if (p.reason[0] != '\0')
      std::printf("          %s: %s\n", p.loaded ? "note" : "reason", p.reason);
  }

  std::printf("\ndevices (%zu):\n", inv.devices.size());
  for (const auto& d : inv.devices) {
    std::printf("  %s\n", d.name);
    std::printf("    plugin        %s%s\n", d.plugin, d.is_host ? " (host memory)" : "");
    if (d.model[0] != '\0') std::printf("    model         %s\n", d.model);
    std::printf("    memory        %s\n",
                d.mem_bytes ? bytes_text(d.mem_bytes).c_str() : "unknown");
    if (d.pci_bus_id[0] != '\0') std::printf("    pci bus id    %s\n", d.pci_bus_id);
    std::string uuid = uuid_text(d.uuid);
    if (!uuid.empty()) std::printf("    uuid          %s\n", uuid.c_str());
    if (d.numa_node >= 0) std::printf("    numa node     %d\n", d.numa_node);
    auto caps = bit_names(d.caps, kDeviceCaps);
    std::printf("    caps          %s\n", caps.empty() ? "none" : join(caps, ", ").c_str());
  }

  std::printf("\nnet devices (%zu):\n", inv.nets.size());
  for (const auto& n : inv.nets) {
    std::printf("  %s/%s\n", n.plugin, n.name);
    if (n.bandwidth_MBps)
      std::printf("    bandwidth     %" PRIu64 " MB/s\n", n.bandwidth_MBps);
    else
      std::printf("    bandwidth     not declared (calibrated by the core)\n");
    if (n.latency_ns)
      std::printf("    latency       %u ns\n", n.latency_ns);
    else
      std::printf("    latency       not declared (calibrated by the core)\n");
#ifdef HMC_HAS_NET_CALIBRATION
    if (n.measured_bandwidth_MBps || n.measured_latency_ns)
      std::printf("    measured      %" PRIu64
                  " MB/s, %.2f us one-way, over loopback on this "
                  "host (used for peers on this host; a bound for others)\n",
                  n.measured_bandwidth_MBps, n.measured_latency_ns / 1000.0);
    if (n.calibration[0] != '\0') std::printf("    calibration   %s\n", n.calibration);
#endif
    auto kinds = bit_names(n.mem_ifaces, kMemIfaces);
    if (n.dmabuf) kinds.push_back("device memory by dma-buf");
#ifdef HMC_HAS_NET_RMA_MEM_IFACES
    for (const auto& k : bit_names(n.rma_mem_ifaces, kMemIfaces))
      kinds.push_back(k + " by pointer for put/get (peermem)");
#endif
    std::printf("    memory        %s\n", kinds.empty() ? "none" : join(kinds, ", ").c_str());
    if (n.nic_guid)
      std::printf("    nic           guid %016" PRIx64 ", port %u\n", n.nic_guid, n.nic_port);
#ifdef HMC_HAS_NET_FABRIC
    if (n.fabric[0] != '\0')
      std::printf("    fabric        %s (pairs with a peer's %s device on it, whatever its name)\n",
                  n.fabric, n.plugin);
#endif
#ifdef HMC_HAS_NET_DETAILS
    if (n.link_layer[0] != '\0') std::printf("    link layer    %s\n", n.link_layer);
    for (const auto& [name, value] : detail_lines(str(n.details)))
      std::printf("    %-13s %s\n", name.c_str(), value.c_str());
#endif
    auto flags = bit_names(n.flags, kNetFlags);
    std::printf("    flags         %s\n", flags.empty() ? "none" : join(flags, ", ").c_str());
    if (n.max_inflight)
      std::printf("    max in-flight %u per endpoint\n", n.max_inflight);
    else
      std::printf("    max in-flight no limit\n");
    if (n.max_msg_size)
      std::printf("    max message   %s\n", bytes_text(n.max_msg_size).c_str());
    else
      std::printf("    max message   no limit\n");
    if (n.pci_path[0] != '\0') std::printf("    pci path      %s\n", n.pci_path);
  }
  print_device_paths(inv);
  for (const auto& e : inv.errors) std::printf("\nerror: %s\n", e.c_str());
}

// Unknown figures (0 bandwidth, -1 NUMA node, an empty name) are null.
void print_json(const Inventory& inv) {
  Json j;
  j["version"] = hmc_version();
  j["api_version"] =
      std::to_string(HMC_API_VERSION_MAJOR) + "." + std::to_string(HMC_API_VERSION_MINOR);
  j["plugins"] = Json::array();
  for (const auto& p : inv.plugins)
    j["plugins"].push_back({{"name", str(p.name)},
                            {"kind", kind_text(p.kind)},
                            {"path", str(p.path)},
                            {"abi_version", or_null(p.abi_version, 0u)},
                            {"loaded", bool(p.loaded)},
                            {"reason", or_null(str(p.reason))}});
  j["devices"] = Json::array();
  for (const auto& d : inv.devices) {
    Json o = {{"name", str(d.name)},
              {"plugin", str(d.plugin)},
              {"model", or_null(str(d.model))},
              {"pci_bus_id", or_null(str(d.pci_bus_id))},
              {"uuid", or_null(uuid_text(d.uuid))},
              {"numa_node", or_null(int(d.numa_node), -1)},
              {"mem_bytes", or_null(uint64_t(d.mem_bytes), uint64_t(0))},
              {"is_host", bool(d.is_host)}};
#ifdef HMC_HAS_DEVICE_COPY_FIGURES
    o["copy_d2h_MBps"] = or_null(double(d.copy_d2h_MBps), 0.0);
    o["copy_h2d_MBps"] = or_null(double(d.copy_h2d_MBps), 0.0);
    o["copy_d2d_MBps"] = or_null(double(d.copy_d2d_MBps), 0.0);
    o["copy_basis"] = or_null(str(d.copy_basis));
    o["copy_ways"] = or_null(str(d.copy_ways));
#endif
    o["caps"] = bit_names(d.caps, kDeviceCaps);
    j["devices"].push_back(std::move(o));
  }
  j["net_devices"] = Json::array();
  for (const auto& n : inv.nets) {
    Json o;
    o["plugin"] = str(n.plugin);
    o["name"] = str(n.name);
    o["pci_path"] = or_null(str(n.pci_path));
    o["bandwidth_MBps"] = or_null(double(n.bandwidth_MBps), 0.0);
    o["latency_ns"] = or_null(double(n.latency_ns), 0.0);
#ifdef HMC_HAS_NET_CALIBRATION
    o["measured_bandwidth_MBps"] = or_null(double(n.measured_bandwidth_MBps), 0.0);
    o["measured_latency_ns"] = or_null(double(n.measured_latency_ns), 0.0);
    o["calibration"] = or_null(str(n.calibration));
#endif
    o["mem_ifaces"] = bit_names(n.mem_ifaces, kMemIfaces);
    o["dmabuf"] = bool(n.dmabuf);
#ifdef HMC_HAS_NET_RMA_MEM_IFACES
    o["rma_mem_ifaces"] = bit_names(n.rma_mem_ifaces, kMemIfaces);
#endif
    o["nic_guid"] = or_null(uint64_t(n.nic_guid), uint64_t(0));
    o["nic_port"] = or_null(uint64_t(n.nic_port), uint64_t(0));
#ifdef HMC_HAS_NET_FABRIC
    o["fabric"] = or_null(str(n.fabric));
#endif
#ifdef HMC_HAS_NET_DETAILS
    o["link_layer"] = or_null(str(n.link_layer));
    o["details"] = json_details(str(n.details));
#endif
    o["flags"] = bit_names(n.flags, kNetFlags);
    o["max_inflight"] = or_null(uint64_t(n.max_inflight), uint64_t(0));
    o["max_msg_size"] = or_null(uint64_t(n.max_msg_size), uint64_t(0));  // null: no limit
    j["net_devices"].push_back(std::move(o));
  }
  j["errors"] = inv.errors;
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

// Reads the configuration table; ctx may be NULL (the core's variables only, see the report).
bool read_config(hmc_context_t ctx, std::vector<hmc_config_entry_t>* out, std::string* err) {
  int n = 0;
  hmc_status_t s = hmc_config_count(ctx, &n);
  if (s != HMC_SUCCESS) {
    *err = failure("hmc_config_count", s);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    hmc_config_entry_t e{};
    e.struct_size = sizeof e;
    s = hmc_config_entry(ctx, i, &e);
    if (s != HMC_SUCCESS) {
      *err = failure("hmc_config_entry", s);
      return false;
    }
    out->push_back(e);
  }
  return true;
}

// Secrets (HMC_AUTH_TOKEN) are not printed: hmc-info output ends up in bug reports.
bool is_secret(const std::string& name) {
  for (const char* w : {"TOKEN", "SECRET", "PASSWORD"})
    if (name.find(w) != std::string::npos) return true;
  return false;
}

std::string shown_value(const hmc_config_entry_t& e) {
  if (is_secret(str(e.name)) && e.is_set) return "(set, hidden)";
  return str(e.value);
}

void print_config_text(const std::vector<hmc_config_entry_t>& entries) {
  std::printf("HMC_ variables (%zu; * = set in the environment):\n", entries.size());
  for (const auto& e : entries) {
    std::printf("\n%s %s=%s\n", e.is_set ? "*" : " ", e.name, shown_value(e).c_str());
    std::printf("    default %s, read by %s\n",
                e.default_value[0] ? ("\"" + str(e.default_value) + "\"").c_str() : "empty",
                e.owner[0] ? e.owner : "core");
    std::printf("    %s\n", e.help);
  }
}

void print_config_json(const std::vector<hmc_config_entry_t>& entries) {
  Json j;
  j["version"] = hmc_version();
  j["config"] = Json::array();
  for (const auto& e : entries)
    j["config"].push_back({{"name", str(e.name)},
                           {"value", shown_value(e)},
                           {"default", str(e.default_value)},
                           {"set", bool(e.is_set)},
                           {"owner", e.owner[0] ? str(e.owner) : std::string("core")},
                           {"help", str(e.help)}});
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

// The Markdown tables of docs/configuration.md. A plugin's variables go under its folder name
// (net-hoststage, device-cuda), found from the plugin list; plugins is empty when no context
// could be made, and then only the core's variables are listed.
void print_config_markdown(const std::vector<hmc_config_entry_t>& entries,
                           const std::vector<hmc_plugin_info_t>& plugins) {
  std::vector<hmc_info::ConfigDocEntry> doc;
  for (const auto& e : entries) {
    std::string owner = e.owner[0] ? str(e.owner) : "core";
    std::string section = owner;
    for (const auto& p : plugins)
      if (p.loaded && str(p.name) == owner && p.kind != HMC_PLUGIN_KIND_UNKNOWN)
        section = std::string(kind_text(p.kind)) + "-" + owner;
    std::string help = str(e.help);
    // The C API hands out at most sizeof(help) - 1 bytes, a cut text ending with "...".
    if (help.size() + 4 >= sizeof(e.help) && help.size() >= 3 &&
        help.compare(help.size() - 3, 3, "...") == 0)
      help += " (cut: hmc_config_entry_t holds 255 bytes)";
    doc.push_back({str(e.name), str(e.default_value), help, section});
  }
  hmc_info::print_config_markdown(doc, stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app(kAbout, "hmc-info");
  hmc_tools::add_version(app, "hmc-info", hmc_version());
  app.add_flag("--config", a.config,
               "list every HMC_ variable instead: its value, default, who reads it and its "
               "meaning");
  std::string format = "text";
  app.add_option("--format", format,
                 "text (default); json: one JSON object; markdown (with --config only): the "
                 "variables of the core and of the plugins that load here as Markdown tables of "
                 "name, default and meaning, one per owner (the layout of docs/configuration.md)")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  bool json = false;
  app.add_flag("--json", json, "the same as --format json");
  app.add_flag("--calibrate", a.calibrate,
               "first measure the net devices that declare no bandwidth or latency (over "
               "loopback in this process, about a second) and the copy rates of each device "
               "plugin, and show the figures; without it, figures already measured or cached "
               "are shown");
  std::vector<std::string> require;
  app.add_option("--require", require,
                 "fail (exit status 3) unless every plugin named in the comma-separated list "
                 "loaded here, a device plugin with at least one device")
      ->type_name("NAME[,NAME...]");
  app.footer(kFooter);
  if (int rc = hmc_tools::parse(app, argc, argv); rc >= 0) return rc;
  for (const std::string& list : require) {
    for (size_t start = 0; start <= list.size();) {
      size_t comma = std::min(list.find(',', start), list.size());
      std::string name = list.substr(start, comma - start);
      if (name.empty()) {
        std::fprintf(stderr, "hmc-info: --require '%s' has an empty name\n", list.c_str());
        return 2;
      }
      a.require.push_back(name);
      start = comma + 1;
    }
  }
  a.format = json || format == "json" ? Format::Json
             : format == "markdown"   ? Format::Markdown
                                      : Format::Text;
  if (a.format == Format::Markdown && !a.config) {
    std::fprintf(stderr, "hmc-info: --format markdown applies to --config only\n");
    return 2;
  }

  // No progress thread: hmc-info only asks questions.
  hmc_context_options_t opts{};
  opts.struct_size = sizeof opts;
  opts.progress_thread = 0;
  hmc_context_t ctx = nullptr;
  hmc_status_t s = hmc_context_create(&opts, &ctx);
  std::string create_error;
  if (s != HMC_SUCCESS) create_error = failure("hmc_context_create", s);

  if (a.config) {
    // An invalid HMC_ variable makes context creation fail: that is when --config is needed
    // most, so fall back to the core's table without a context.
    if (ctx == nullptr) std::fprintf(stderr, "hmc-info: %s\n", create_error.c_str());
    std::vector<hmc_config_entry_t> entries;
    std::vector<hmc_plugin_info_t> plugins;
    std::vector<std::string> errors;
    std::string err;
    bool ok = read_config(ctx, &entries, &err);
    if (ok && ctx != nullptr && a.format == Format::Markdown)
      read_list(ctx, hmc_plugin_count, hmc_plugin_info, "hmc_plugin_info", &plugins, &errors);
    if (ctx != nullptr) hmc_context_destroy(ctx);
    if (!ok || !errors.empty()) {
      std::fprintf(stderr, "hmc-info: %s\n", ok ? errors.front().c_str() : err.c_str());
      return 1;
    }
    if (a.format == Format::Json)
      print_config_json(entries);
    else if (a.format == Format::Markdown)
      print_config_markdown(entries, plugins);
    else
      print_config_text(entries);
    return create_error.empty() ? 0 : 1;
  }

  if (ctx == nullptr) {
    std::fprintf(stderr, "hmc-info: %s\n", create_error.c_str());
    return a.require.empty() ? 1 : 3;
  }
  Inventory inv;
  if (a.calibrate) {
#ifdef HMC_HAS_NET_CALIBRATION
    s = hmc_net_calibrate(ctx);
    if (s != HMC_SUCCESS) inv.errors.push_back(failure("hmc_net_calibrate", s));
#endif
#ifdef HMC_HAS_DEVICE_COPY_FIGURES
    s = hmc_device_calibrate(ctx);
    if (s != HMC_SUCCESS) inv.errors.push_back(failure("hmc_device_calibrate", s));
#endif
#ifndef HMC_HAS_NET_CALIBRATION
    inv.errors.push_back("--calibrate: this hmc has no hmc_net_calibrate");
#endif
  }
  read_list(ctx, hmc_plugin_count, hmc_plugin_info, "hmc_plugin_info", &inv.plugins, &inv.errors);
  read_list(ctx, hmc_device_count, hmc_device_info, "hmc_device_info", &inv.devices, &inv.errors);
  read_list(ctx, hmc_net_device_count, hmc_net_device_info, "hmc_net_device_info", &inv.nets,
            &inv.errors);
  std::string config_error;
  if (!read_config(ctx, &inv.config, &config_error)) inv.errors.push_back(config_error);
  if (a.format == Format::Json)
    print_json(inv);
  else
    print_text(inv);
  hmc_context_destroy(ctx);
  std::vector<std::string> missing = missing_plugins(a.require, inv.plugins, inv.devices);
  for (const auto& m : missing) std::fprintf(stderr, "hmc-info: %s\n", m.c_str());
  if (!missing.empty()) return 3;
  return inv.errors.empty() ? 0 : 1;
}

// The second process of the device plugins' IPC tests:
//   fakegpu_ipc_peer <plugin.so> <LIBRARY_VAR> <library> <handle hex> <size> <seed>
// loads the plugin with LIBRARY_VAR=library, opens the IPC handle on device 0, checks that the
// memory holds pattern(seed), writes pattern(seed + 1) into it, closes the mapping and exits.
// Exit status: 0 done, 2 usage/load/init failure, 3 ipc_open failed, 4 wrong data, 5 a copy failed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugin_host.h"

using namespace hmc::test;

namespace {

// Copies size bytes with the plugin on device 0 and waits for the copy.
bool copy(PluginHost& host, void* dst, const void* src, size_t size, hmc_copy_kind_t kind) {
  hmc_device_stream_t* s = nullptr;
  hmc_device_event_t* e = nullptr;
  bool ok = host->stream_create(host.ctx(), 0, &s) == HMC_PLUGIN_SUCCESS &&
            host->event_create(host.ctx(), 0, &e) == HMC_PLUGIN_SUCCESS &&
            host->copy_async(s, dst, src, size, kind) == HMC_PLUGIN_SUCCESS &&
            host->event_record(e, s) == HMC_PLUGIN_SUCCESS &&
            wait_event(host.table(), e) == HMC_PLUGIN_SUCCESS;
  if (e != nullptr) host->event_destroy(e);
  if (s != nullptr) host->stream_destroy(s);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s plugin.so VAR library handle-hex size seed\n", argv[0]);
    return 2;
  }
  PluginHost host(std::map<std::string, std::string>{{argv[2], argv[3]}});
  std::string why;
  if (!host.load(argv[1], &why) || host.init() != HMC_PLUGIN_SUCCESS) {
    std::fprintf(stderr, "ipc peer: cannot load %s: %s\n%s", argv[1], why.c_str(),
                 host.log_text().c_str());
    return 2;
  }
  std::vector<uint8_t> handle = from_hex(argv[4]);
  size_t size = std::strtoull(argv[5], nullptr, 10);
  auto seed = static_cast<uint32_t>(std::strtoul(argv[6], nullptr, 10));
  void* dev = nullptr;
  if (host->ipc_open(host.ctx(), 0, handle.data(), handle.size(), &dev) != HMC_PLUGIN_SUCCESS) {
    std::fprintf(stderr, "ipc peer: ipc_open failed\n%s", host.log_text().c_str());
    return 3;
  }
  hmc_device_ptr_info_t info{};
  info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
  if (host->ptr_query(host.ctx(), dev, &info) != HMC_PLUGIN_SUCCESS || !info.owned ||
      info.device != 0 || info.size < size) {
    std::fprintf(stderr, "ipc peer: the mapping is not known as device 0 memory of %zu bytes\n",
                 size);
    return 4;
  }
  std::vector<uint8_t> buf(size);
  if (!copy(host, buf.data(), dev, size, HMC_COPY_DEVICE_TO_HOST)) {
    std::fprintf(stderr, "ipc peer: reading failed\n%s", host.log_text().c_str());
    return 5;
  }
  size_t bad = 0;
  if (!check_pattern(buf.data(), size, seed, &bad)) {
    std::fprintf(stderr, "ipc peer: byte %zu differs from what the exporter wrote\n", bad);
    return 4;
  }
  fill_pattern(buf.data(), size, seed + 1);
  if (!copy(host, dev, buf.data(), size, HMC_COPY_HOST_TO_DEVICE)) {
    std::fprintf(stderr, "ipc peer: writing failed\n%s", host.log_text().c_str());
    return 5;
  }
  if (host->ipc_close(host.ctx(), dev) != HMC_PLUGIN_SUCCESS) return 3;
  return host.finalize() == HMC_PLUGIN_SUCCESS ? 0 : 2;
}

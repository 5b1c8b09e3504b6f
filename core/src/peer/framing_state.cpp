// The per-peer mappings of framed transfers: unmapped and unpinned when the last user lets go.
#include "peer/framing_state.h"

#include <sys/mman.h>

#include "device/registry.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

SharedSlab::~SharedSlab() {
  if (pinned_on && pinned_on->plugin) {
    hmc_plugin_status_t st = pinned_on->plugin->host_unregister(pinned_on->plugin_ctx, base);
    if (st != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("shared bounces: unpinning a peer's staging slab on {} failed: {}", pinned_on->name,
                plugin_status_string(st));
  }
  if (base) munmap(base, bytes);
}

IpcMapping::~IpcMapping() {
  if (device && device->plugin && base) {
    hmc_plugin_status_t st = device->plugin->ipc_close(device->plugin_ctx, base);
    if (st != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("device IPC: unmapping a peer's allocation at {} on {} failed: {}", base,
                device->name, plugin_status_string(st));
  }
}

void PeerFramingState::trim_ipc(size_t keep) {
  while (ipc_maps.size() > keep) {
    auto victim = ipc_maps.end();
    for (auto it = ipc_maps.begin(); it != ipc_maps.end(); ++it)
      if (it->second.mapping.use_count() == 1 &&
          (victim == ipc_maps.end() || it->second.last_use < victim->second.last_use))
        victim = it;
    if (victim == ipc_maps.end()) return;  // every one is being read
    ipc_maps.erase(victim);
  }
}

}  // namespace hmc

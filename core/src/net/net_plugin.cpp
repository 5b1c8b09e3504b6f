#include "net/net_plugin.h"

#include "util/log.h"
#include "util/status.h"

namespace hmc {

std::string NetDevice::key() const {
  return plugin->name() + "/" + name;
}

NetPlugin::NetPlugin(const hmc_net_plugin_v2_t* table, hmc_net_ctx_t* ctx, std::string name,
                     const hmc_host_services_t* host)
    : table_(table), ctx_(ctx), name_(std::move(name)), host_(host) {}

hmc_status_t NetPlugin::query_devices() {
  std::lock_guard<std::mutex> lock(mutex_);
  int count = 0;
  hmc_plugin_status_t st = table_->device_count(ctx_, &count);
  if (st != HMC_PLUGIN_SUCCESS || count < 0)
    return fail(HMC_ERR_PLUGIN, "net plugin {}: device_count failed: {}", name_,
                plugin_status_string(st));
  devices_.clear();
  for (int i = 0; i < count; ++i) {
    NetDevice d;
    d.plugin = this;
    d.index = i;
    d.props.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    st = table_->device_props(ctx_, i, &d.props);
    if (st != HMC_PLUGIN_SUCCESS)
      return fail(HMC_ERR_PLUGIN, "net plugin {}: device_props({}) failed: {}", name_, i,
                  plugin_status_string(st));
    d.name = d.props.name ? d.props.name : fmt::format("dev{}", i);
    d.pci_path = d.props.pci_path ? d.props.pci_path : "";
    devices_.push_back(std::move(d));
  }
  return HMC_SUCCESS;
}

int NetPlugin::wait_fd() {
  if (wait_fd_ == -2) {
    wait_fd_ = -1;
    if (HMC_NET_SLOT(table_, wait_fd)) {
      std::lock_guard<std::mutex> lock(mutex_);
      int fd = -1;
      if (table_->wait_fd(ctx_, &fd) == HMC_PLUGIN_SUCCESS && fd >= 0) wait_fd_ = fd;
    }
  }
  return wait_fd_;
}

}  // namespace hmc

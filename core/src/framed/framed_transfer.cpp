#include "framed/framed_transfer.h"

namespace hmc {

FramedTransfer::~FramedTransfer() = default;

void FramedTransfer::end_unmatched(Request*, Peer&) {}

hmc_plugin_status_t FramedTransfer::cancel_step(Request*, Peer&) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}

void FramedTransfer::fail_local(hmc_status_t st, std::string why) {
  if (status_ == HMC_SUCCESS) {
    status_ = st;
    error_ = std::move(why);
  }
}

}  // namespace hmc

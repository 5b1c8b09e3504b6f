// Stream order on hmc's own paths: a collective given the application's stream (hmc.h,
// *_on_stream) starts once the work enqueued on that stream before the call has ended. The gate
// is an event recorded on the stream through the device plugin of the buffers' device
// (event_record_native) and queried, never waited on, by the progress engine.
#pragma once

#include <memory>
#include <string>

#include "hmc/hmc.h"
#include "hmc/plugin/device.h"

namespace hmc {
struct Device;
}

namespace hmc::coll {

class StreamGate {
 public:
  // Records the gate's event on `stream` of `device`. HMC_ERR_INVALID_ARGUMENT for host memory
  // (no device), HMC_ERR_NOT_SUPPORTED for a device plugin without event_record_native; the
  // plugin's failure otherwise. `what` names the collective in messages.
  static hmc_status_t make(const Device* device, void* stream, const char* what,
                           std::unique_ptr<StreamGate>* out);
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  // True once the stream's prior work has ended (*st HMC_SUCCESS), or when it failed (*st the
  // error, its message set); false while it runs.
  bool passed(hmc_status_t* st);

 private:
  StreamGate(const hmc_device_plugin_v1_t* plugin, hmc_device_event_t* ev, std::string what)
      : plugin_(plugin), ev_(ev), what_(std::move(what)) {}
  const hmc_device_plugin_v1_t* plugin_;
  hmc_device_event_t* ev_;
  std::string what_;
};

}  // namespace hmc::coll

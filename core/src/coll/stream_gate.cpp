#include "coll/stream_gate.h"

#include "device/registry.h"
#include "util/status.h"

namespace hmc::coll {

hmc_status_t StreamGate::make(const Device* device, void* stream, const char* what,
                              std::unique_ptr<StreamGate>* out) {
  if (!device || device->is_host())
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: a stream was given, but the buffers are host memory (a stream orders device "
                "work; pass none for host buffers)",
                what);
  const hmc_device_plugin_v1_t* p = device->plugin;
  if (!HMC_DEVICE_SLOT(p, event_record_native))
    return fail(HMC_ERR_NOT_SUPPORTED,
                "{}: the device plugin '{}' of {} cannot record on an application's stream "
                "(no event_record_native slot)",
                what, device->plugin_name, device->name);
  hmc_device_event_t* ev = nullptr;
  int st = p->event_create(device->plugin_ctx, device->index, &ev);
  if (st != HMC_PLUGIN_SUCCESS)
    return fail(HMC_ERR_PLUGIN, "{}: event_create on {} failed (plugin status {})", what,
                device->name, st);
  st = p->event_record_native(ev, stream);
  if (st != HMC_PLUGIN_SUCCESS) {
    p->event_destroy(ev);
    return fail(st == HMC_PLUGIN_ERR_INVALID_ARGUMENT ? HMC_ERR_INVALID_ARGUMENT : HMC_ERR_PLUGIN,
                "{}: recording on the application's stream {} of {} failed (plugin status {})",
                what, stream, device->name, st);
  }
  out->reset(new StreamGate(p, ev, what));
  return HMC_SUCCESS;
}

StreamGate::~StreamGate() {
  plugin_->event_destroy(ev_);
}

bool StreamGate::passed(hmc_status_t* st) {
  int q = plugin_->event_query(ev_);
  if (q == HMC_PLUGIN_IN_PROGRESS) return false;
  *st = q == HMC_PLUGIN_SUCCESS ? HMC_SUCCESS
                                : fail(HMC_ERR_PLUGIN,
                                       "{}: the work before it on the application's stream failed "
                                       "(plugin status {})",
                                       what_, q);
  return true;
}

}  // namespace hmc::coll

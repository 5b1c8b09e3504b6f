#include "verbs_api.h"

#include <dlfcn.h>

namespace hmc::ibverbs {

namespace {
template <typename F>
bool resolve(void* dl, const char* name, F* out, bool required, std::string* why) {
  void* p = dlsym(dl, name);
  if (p == nullptr && required) {
    *why = std::string("it has no ") + name;
    return false;
  }
  *out = reinterpret_cast<F>(p);
  return true;
}
}  // namespace

bool VerbsApi::load(const std::string& lib, std::string* why) {
  dl = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    const char* e = dlerror();
    *why = std::string("cannot load ") + lib + ": " + (e != nullptr ? e : "unknown error") +
           " (install rdma-core's libibverbs1, or name the library in HMC_IBVERBS_LIBRARY)";
    return false;
  }
  std::string missing;
  bool ok = resolve(dl, "ibv_get_device_list", &get_device_list, true, &missing) &&
            resolve(dl, "ibv_free_device_list", &free_device_list, true, &missing) &&
            resolve(dl, "ibv_get_device_name", &get_device_name, true, &missing) &&
            resolve(dl, "ibv_get_device_guid", &get_device_guid, true, &missing) &&
            resolve(dl, "ibv_open_device", &open_device, true, &missing) &&
            resolve(dl, "ibv_close_device", &close_device, true, &missing) &&
            resolve(dl, "ibv_query_device", &query_device, true, &missing) &&
            resolve(dl, "ibv_query_port", &query_port, true, &missing) &&
            resolve(dl, "ibv_query_gid", &query_gid, true, &missing) &&
            resolve(dl, "_ibv_query_gid_ex", &query_gid_ex, false, &missing) &&
            resolve(dl, "ibv_alloc_pd", &alloc_pd, true, &missing) &&
            resolve(dl, "ibv_dealloc_pd", &dealloc_pd, true, &missing) &&
            resolve(dl, "ibv_reg_mr", &reg_mr, true, &missing) &&
            resolve(dl, "ibv_reg_dmabuf_mr", &reg_dmabuf_mr, false, &missing) &&
            resolve(dl, "ibv_dereg_mr", &dereg_mr, true, &missing) &&
            resolve(dl, "ibv_create_comp_channel", &create_comp_channel, true, &missing) &&
            resolve(dl, "ibv_destroy_comp_channel", &destroy_comp_channel, true, &missing) &&
            resolve(dl, "ibv_create_cq", &create_cq, true, &missing) &&
            resolve(dl, "ibv_destroy_cq", &destroy_cq, true, &missing) &&
            resolve(dl, "ibv_get_cq_event", &get_cq_event, true, &missing) &&
            resolve(dl, "ibv_ack_cq_events", &ack_cq_events, true, &missing) &&
            resolve(dl, "ibv_create_srq", &create_srq, true, &missing) &&
            resolve(dl, "ibv_destroy_srq", &destroy_srq, true, &missing) &&
            resolve(dl, "ibv_create_qp", &create_qp, true, &missing) &&
            resolve(dl, "ibv_modify_qp", &modify_qp, true, &missing) &&
            resolve(dl, "ibv_destroy_qp", &destroy_qp, true, &missing) &&
            resolve(dl, "ibv_wc_status_str", &wc_status_str, true, &missing);
  if (!ok) {
    *why = lib + " is not a usable libibverbs: " + missing;
    unload();
    return false;
  }
  return true;
}

// libibverbs loads provider libraries and may keep state for the process: once resolved it
// stays loaded (dlopen counts references, so each context's load is cheap).
void VerbsApi::unload() {
  if (dl != nullptr) dlclose(dl);
  *this = VerbsApi{};
}

}  // namespace hmc::ibverbs

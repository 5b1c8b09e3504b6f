// The libibverbs functions the plugin calls, looked up at run time (dlopen of
// HMC_IBVERBS_LIBRARY, default libibverbs.so.1): the plugin has no link-time dependency on
// rdma-core. Data-path calls (ibv_post_send, ibv_poll_cq, ibv_req_notify_cq ...) are inline in
// verbs.h and go through the device context's own table, so they need no entry here.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace hmc::ibverbs {

struct VerbsApi {
  void* dl = nullptr;
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  __be64 (*get_device_guid)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  // The exported ibv_query_port, which fills the part of ibv_port_attr it knows.
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  // Optional (rdma-core 31+): the GID's type; without it sysfs is read.
  int (*query_gid_ex)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  // Optional (rdma-core 34+).
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_comp_channel* (*create_comp_channel)(ibv_context*) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  int (*get_cq_event)(ibv_comp_channel*, ibv_cq**, void**) = nullptr;
  void (*ack_cq_events)(ibv_cq*, unsigned int) = nullptr;
  ibv_srq* (*create_srq)(ibv_pd*, ibv_srq_init_attr*) = nullptr;
  int (*destroy_srq)(ibv_srq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status) = nullptr;

  // Opens lib and resolves every function. False, with the reason in *why (the dlopen error,
  // or the missing symbol), when it cannot.
  bool load(const std::string& lib, std::string* why);
  void unload();
};

}  // namespace hmc::ibverbs

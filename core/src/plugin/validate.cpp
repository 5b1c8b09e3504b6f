#include "plugin/validate.h"

#include <fmt/format.h>

#include <cstring>

#include "util/status.h"

namespace hmc::plugin {
namespace {

struct Slot {
  const char* name;
  size_t offset;
};

#define HMC_SLOT(type, field)     \
  Slot {                          \
#field, offsetof(type, field) \
  }

const Slot kNetRequired[] = {
    HMC_SLOT(hmc_net_plugin_v2_t, init),           HMC_SLOT(hmc_net_plugin_v2_t, finalize),
    HMC_SLOT(hmc_net_plugin_v2_t, device_count),   HMC_SLOT(hmc_net_plugin_v2_t, device_props),
    HMC_SLOT(hmc_net_plugin_v2_t, listen),         HMC_SLOT(hmc_net_plugin_v2_t, accept),
    HMC_SLOT(hmc_net_plugin_v2_t, close_listener), HMC_SLOT(hmc_net_plugin_v2_t, connect),
    HMC_SLOT(hmc_net_plugin_v2_t, ep_ready),       HMC_SLOT(hmc_net_plugin_v2_t, close_ep),
    HMC_SLOT(hmc_net_plugin_v2_t, test),
};

const Slot kDeviceRequired[] = {
    HMC_SLOT(hmc_device_plugin_v1_t, init),
    HMC_SLOT(hmc_device_plugin_v1_t, finalize),
    HMC_SLOT(hmc_device_plugin_v1_t, device_count),
    HMC_SLOT(hmc_device_plugin_v1_t, device_info),
    HMC_SLOT(hmc_device_plugin_v1_t, unavailable_reason),
    HMC_SLOT(hmc_device_plugin_v1_t, runtime_version),
    HMC_SLOT(hmc_device_plugin_v1_t, mem_alloc),
    HMC_SLOT(hmc_device_plugin_v1_t, mem_free),
    HMC_SLOT(hmc_device_plugin_v1_t, ptr_query),
    HMC_SLOT(hmc_device_plugin_v1_t, stream_create),
    HMC_SLOT(hmc_device_plugin_v1_t, stream_destroy),
    HMC_SLOT(hmc_device_plugin_v1_t, copy_async),
    HMC_SLOT(hmc_device_plugin_v1_t, event_create),
    HMC_SLOT(hmc_device_plugin_v1_t, event_destroy),
    HMC_SLOT(hmc_device_plugin_v1_t, event_record),
    HMC_SLOT(hmc_device_plugin_v1_t, event_query),
};

const Slot kCclRequired[] = {
    HMC_SLOT(hmc_ccl_plugin_v1_t, init),
    HMC_SLOT(hmc_ccl_plugin_v1_t, finalize),
    HMC_SLOT(hmc_ccl_plugin_v1_t, device_count),
    HMC_SLOT(hmc_ccl_plugin_v1_t, unavailable_reason),
    HMC_SLOT(hmc_ccl_plugin_v1_t, library_version),
    HMC_SLOT(hmc_ccl_plugin_v1_t, unique_id),
    HMC_SLOT(hmc_ccl_plugin_v1_t, comm_create),
    HMC_SLOT(hmc_ccl_plugin_v1_t, comm_destroy),
    HMC_SLOT(hmc_ccl_plugin_v1_t, comm_abort),
    HMC_SLOT(hmc_ccl_plugin_v1_t, comm_async_error),
    HMC_SLOT(hmc_ccl_plugin_v1_t, comm_error_text),
    HMC_SLOT(hmc_ccl_plugin_v1_t, all_reduce),
    HMC_SLOT(hmc_ccl_plugin_v1_t, all_gather),
    HMC_SLOT(hmc_ccl_plugin_v1_t, reduce_scatter),
    HMC_SLOT(hmc_ccl_plugin_v1_t, broadcast),
    HMC_SLOT(hmc_ccl_plugin_v1_t, send_recv),
    HMC_SLOT(hmc_ccl_plugin_v1_t, test),
};

#undef HMC_SLOT

bool slot_null(const void* table, size_t offset) {
  void (*fn)() = nullptr;
  memcpy(&fn, static_cast<const char*>(table) + offset, sizeof fn);
  return fn == nullptr;
}

template <size_t N>
size_t min_size(const Slot (&slots)[N]) {
  return slots[N - 1].offset + sizeof(void (*)());
}

template <typename Table, size_t N>
std::string check_table(const Table* t, const Slot (&required)[N], uint32_t abi_min,
                        uint32_t abi_max) {
  const hmc_abi_header_t& hdr = t->hdr;
  if (hdr.abi_version < abi_min || hdr.abi_version > abi_max)
    return fmt::format("incompatible ABI version {} (core accepts {}..{})", hdr.abi_version,
                       abi_min, abi_max);
  size_t need = min_size(required);
  if (hdr.struct_size < need)
    return fmt::format("table too small: {} bytes, need at least {}", hdr.struct_size, need);
  std::string bad = check_name(t->name);
  if (!bad.empty()) return bad;
  for (const Slot& s : required)
    if (slot_null(t, s.offset)) return fmt::format("required slot '{}' is NULL", s.name);
  return "";
}

// "slot 'iput' is NULL but device 0 (tcp) sets HMC_NET_FLAG_RMA", or "".
std::string need_slots(const void* table, const char* device_desc, const char* flag,
                       std::initializer_list<Slot> slots) {
  for (const Slot& s : slots)
    if (slot_null(table, s.offset))
      return fmt::format("slot '{}' is NULL but {} sets {}", s.name, device_desc, flag);
  return "";
}

}  // namespace

size_t net_table_min_size() {
  return min_size(kNetRequired);
}
size_t device_table_min_size() {
  return min_size(kDeviceRequired);
}
size_t ccl_table_min_size() {
  return min_size(kCclRequired);
}

std::string status_text(int status) {
  return fmt::format("{} ({})", plugin_status_string(static_cast<hmc_plugin_status_t>(status)),
                     status);
}

std::string check_name(const char* name) {
  if (!name || !*name) return "name is NULL or empty";
  for (const char* p = name; *p; ++p) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok || p - name >= 64)
      return fmt::format("invalid name '{:.80}' (must be 1 to 64 characters of [a-z0-9_])", name);
  }
  return "";
}

std::string check_net_table(const hmc_net_plugin_v2_t* t) {
  return check_table(t, kNetRequired, kNetAbiMin, kNetAbiMax);
}

std::string check_device_table(const hmc_device_plugin_v1_t* t) {
  return check_table(t, kDeviceRequired, kDeviceAbiMin, kDeviceAbiMax);
}

std::string check_ccl_table(const hmc_ccl_plugin_v1_t* t) {
  std::string bad = check_table(t, kCclRequired, kCclAbiMin, kCclAbiMax);
  if (!bad.empty()) return bad;
  if (t->mem_iface == HMC_MEM_IFACE_HOST || t->mem_iface >= HMC_MEM_IFACE_MAX)
    return fmt::format("mem_iface {} is not a device memory interface (1..{})", t->mem_iface,
                       HMC_MEM_IFACE_MAX - 1);
  constexpr uint32_t kDtypes = (1u << (HMC_CCL_DTYPE_I64 + 1)) - 1;
  constexpr uint32_t kOps = (1u << (HMC_CCL_OP_AVG + 1)) - 1;
  if (t->dtypes == 0 || (t->dtypes & ~kDtypes))
    return fmt::format("dtypes 0x{:x} is empty or names unknown dtypes (known: 0x{:x})", t->dtypes,
                       kDtypes);
  if (t->ops & ~kOps)
    return fmt::format("ops 0x{:x} names unknown operations (known: 0x{:x})", t->ops, kOps);
  return "";
}

std::string check_ccl_devices(const hmc_ccl_plugin_v1_t* t, hmc_ccl_ctx_t* ctx, int* count,
                              std::string* unavailable, std::string* library) {
  int n = -1;
  int st = t->device_count(ctx, &n);
  if (st != HMC_PLUGIN_SUCCESS) return "device_count failed: " + status_text(st);
  if (n < 0) return fmt::format("device_count reported {} devices", n);
  *count = n;
  const char* lib = t->library_version(ctx);
  if (lib) *library = lib;
  if (n == 0) {
    const char* why = t->unavailable_reason(ctx);
    if (why) *unavailable = why;
  }
  return "";
}

std::string check_net_devices(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* ctx, int* count) {
  int n = -1;
  int st = t->device_count(ctx, &n);
  if (st != HMC_PLUGIN_SUCCESS) return "device_count failed: " + status_text(st);
  if (n < 0) return fmt::format("device_count reported {} devices", n);
  *count = n;
  using T = hmc_net_plugin_v2_t;
  if (slot_null(t, offsetof(T, iput_notify)) != slot_null(t, offsetof(T, notify_poll)))
    return fmt::format("slot '{}' is NULL but '{}' is not: offer both or neither",
                       slot_null(t, offsetof(T, iput_notify)) ? "iput_notify" : "notify_poll",
                       slot_null(t, offsetof(T, iput_notify)) ? "notify_poll" : "iput_notify");
  for (int dev = 0; dev < n; ++dev) {
    hmc_net_device_props_t props{};
    props.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    st = t->device_props(ctx, dev, &props);
    if (st != HMC_PLUGIN_SUCCESS)
      return fmt::format("device_props({}) failed: {}", dev, status_text(st));
    std::string desc = fmt::format("device {} ({:.64})", dev, props.name ? props.name : "unnamed");
    std::string bad;
    if (props.flags & HMC_NET_FLAG_RMA) {
      bad = need_slots(t, desc.c_str(), "HMC_NET_FLAG_RMA",
                       {{"reg_mr", offsetof(T, reg_mr)},
                        {"dereg_mr", offsetof(T, dereg_mr)},
                        {"rkey_unpack", offsetof(T, rkey_unpack)},
                        {"rkey_release", offsetof(T, rkey_release)},
                        {"iput", offsetof(T, iput)},
                        {"iget", offsetof(T, iget)}});
      if (!bad.empty()) return bad;
    }
    if (props.flags & HMC_NET_FLAG_NEEDS_REG) {
      bad = need_slots(t, desc.c_str(), "HMC_NET_FLAG_NEEDS_REG",
                       {{"reg_mr", offsetof(T, reg_mr)}, {"dereg_mr", offsetof(T, dereg_mr)}});
      if (!bad.empty()) return bad;
    }
    if (props.flags & HMC_NET_FLAG_DMABUF) {
      bad = need_slots(t, desc.c_str(), "HMC_NET_FLAG_DMABUF",
                       {{"reg_mr", offsetof(T, reg_mr)}, {"dereg_mr", offsetof(T, dereg_mr)}});
      if (!bad.empty()) return bad;
    }
    // Registration by pointer for put/get (net.h): of device memory only, and for put/get.
    if (HMC_ABI_HAS_FIELD(&props, hmc_net_device_props_t, rma_mem_ifaces) && props.rma_mem_ifaces) {
      if (props.rma_mem_ifaces & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST))
        return fmt::format(
            "{} declares host memory in rma_mem_ifaces (0x{:x}): host memory "
            "belongs in mem_ifaces",
            desc, props.rma_mem_ifaces);
      if (!(props.flags & HMC_NET_FLAG_RMA))
        return fmt::format("{} declares rma_mem_ifaces 0x{:x} without HMC_NET_FLAG_RMA", desc,
                           props.rma_mem_ifaces);
    }
    if (props.flags & HMC_NET_FLAG_TAGGED) {
      bad = need_slots(t, desc.c_str(), "HMC_NET_FLAG_TAGGED",
                       {{"isend", offsetof(T, isend)}, {"irecv", offsetof(T, irecv)}});
      if (!bad.empty()) return bad;
    }
  }
  return "";
}

std::string check_device_devices(const hmc_device_plugin_v1_t* t, hmc_device_ctx_t* ctx, int* count,
                                 std::string* unavailable) {
  int n = -1;
  int st = t->device_count(ctx, &n);
  if (st != HMC_PLUGIN_SUCCESS) return "device_count failed: " + status_text(st);
  if (n < 0) return fmt::format("device_count reported {} devices", n);
  *count = n;
  if (n == 0) {
    const char* why = t->unavailable_reason(ctx);
    if (why) *unavailable = why;
  }
  using T = hmc_device_plugin_v1_t;
  for (int dev = 0; dev < n; ++dev) {
    hmc_device_props_t info{};
    info.hdr = HMC_ABI_HEADER_INIT(hmc_device_props_t);
    st = t->device_info(ctx, dev, &info);
    if (st != HMC_PLUGIN_SUCCESS)
      return fmt::format("device_info({}) failed: {}", dev, status_text(st));
    std::string desc = fmt::format("device {} ({:.64})", dev, info.name ? info.name : "unnamed");
    std::string bad;
    if (info.caps & HMC_DEVICE_CAP_IPC) {
      bad = need_slots(t, desc.c_str(), "HMC_DEVICE_CAP_IPC",
                       {{"ipc_export", offsetof(T, ipc_export)},
                        {"ipc_open", offsetof(T, ipc_open)},
                        {"ipc_close", offsetof(T, ipc_close)}});
      if (!bad.empty()) return bad;
    }
    if (info.caps & HMC_DEVICE_CAP_DMABUF) {
      bad = need_slots(t, desc.c_str(), "HMC_DEVICE_CAP_DMABUF",
                       {{"dmabuf_export", offsetof(T, dmabuf_export)}});
      if (!bad.empty()) return bad;
    }
    if (info.caps & HMC_DEVICE_CAP_HOST_REGISTER) {
      bad = need_slots(t, desc.c_str(), "HMC_DEVICE_CAP_HOST_REGISTER",
                       {{"host_register", offsetof(T, host_register)},
                        {"host_unregister", offsetof(T, host_unregister)}});
      if (!bad.empty()) return bad;
    }
  }
  return "";
}

}  // namespace hmc::plugin

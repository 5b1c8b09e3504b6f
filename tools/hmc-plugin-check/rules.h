// The rules of the plugin contract the checker tests, as printed under a failure. Each names
// where the rule is written: docs/plugins.md ("rule N" there) or the ABI header.
#pragma once

namespace hmc::check::rule {

// Both kinds.
inline constexpr const char* kLoad =
    "the core's loader accepts the plugin: entry symbol, ABI version, table size, name, required "
    "slots, devices that promise only what the table offers (docs/plugins.md, \"What the loader "
    "refuses\")";
inline constexpr const char* kExports =
    "rule 1: the entry symbol is the only exported symbol (hmc_add_plugin hides the rest)";
inline constexpr const char* kContexts =
    "rule 9: init creates another, independent context while one is live; finalize releases it "
    "and returns HMC_PLUGIN_SUCCESS";
inline constexpr const char* kStructSize =
    "rule 2: a plugin fills only the fields that fit in the caller's hdr.struct_size";
inline constexpr const char* kDeviceIndex =
    "rule 4: a device index out of range is refused with an error status "
    "(HMC_PLUGIN_ERR_INVALID_ARGUMENT), never SUCCESS";
inline constexpr const char* kNoDevice =
    "a plugin without devices here says why (net: init answers HMC_PLUGIN_ERR_NO_DEVICE with a "
    "logged reason; device: device_count 0 and unavailable_reason)";

// Net plugins (net.h).
inline constexpr const char* kNetProps =
    "net.h hmc_net_device_props_t: a name, only defined HMC_NET_FLAG_* bits, host memory in "
    "mem_ifaces (every device that moves bytes reaches it)";
inline constexpr const char* kListen =
    "net.h listen: a device listens and writes a connection handle of 1 to HMC_NET_HANDLE_MAX "
    "bytes";
inline constexpr const char* kConnect =
    "net.h connect/accept/ep_ready: the handle from listen connects; accept and ep_ready answer "
    "IN_PROGRESS until the endpoint is established, then SUCCESS, within HMC_TIMEOUT_MS";
inline constexpr const char* kHello =
    "net.h connect_hello/accept_hello: offered together; connect_hello writes at most *len bytes";
inline constexpr const char* kNoBlock =
    "net.h: no slot blocks; a request ends (test answers done = 1) within HMC_TIMEOUT_MS, and test "
    "answers SUCCESS with done = 0 while it is pending";
inline constexpr const char* kMessages =
    "net.h: tagged messages arrive whole, with *bytes = their length; exact tag match; messages "
    "of one tag match receives in the order they were sent";
inline constexpr const char* kZeroByte = "net.h: zero-byte messages are valid";
inline constexpr const char* kTruncation =
    "net.h: a message longer than the receive buffer ends the receive with "
    "HMC_PLUGIN_ERR_TRUNCATED (the send succeeds), and test reports in *bytes the length that was "
    "sent (the bytes delivered only where the transport cannot know)";
inline constexpr const char* kCancel =
    "net.h cancel: a receive not yet matched can be cancelled; test then ends it with "
    "HMC_PLUGIN_ERR_CANCELLED";
inline constexpr const char* kPeerLost =
    "net.h: when the connection breaks, a pending receive ends with HMC_PLUGIN_ERR_PEER_LOST";
inline constexpr const char* kClose =
    "net.h close_ep/close_listener: release the object (and the requests still pending on an "
    "endpoint) and return HMC_PLUGIN_SUCCESS";
inline constexpr const char* kRegister =
    "net.h reg_mr: host memory registers with a device that sets HMC_NET_FLAG_RMA, giving a "
    "remote key of 1 to HMC_NET_RKEY_MAX bytes; dereg_mr releases it";
inline constexpr const char* kPutGet =
    "net.h: put/get completion means the data is in place at the target (put) or locally (get)";
inline constexpr const char* kBounds =
    "net.h: one-sided access outside the registered region completes with "
    "HMC_PLUGIN_ERR_REMOTE, checked by the owner of the memory before any byte is touched";
inline constexpr const char* kWakeup =
    "net.h wait_fd/arm: wait_fd gives an fd >= 0; arm answers SUCCESS or IN_PROGRESS";

// Device plugins (device.h).
inline constexpr const char* kDeviceInfo =
    "device.h device_info: SUCCESS for every device, with a name; ipc_handle_size of 1 to "
    "HMC_DEVICE_IPC_HANDLE_MAX bytes when the device sets HMC_DEVICE_CAP_IPC";
inline constexpr const char* kAlloc =
    "device.h mem_alloc/ptr_query: device memory that ptr_query reports as owned, on that device, "
    "not host memory, with the allocation's base and size; mem_free releases it";
inline constexpr const char* kForeign =
    "device.h ptr_query: owned = 0 for memory that is not the plugin's; mem_free refuses it";
inline constexpr const char* kCopy =
    "device.h copy_async/event_record/event_query: the event answers IN_PROGRESS until the "
    "copies before it are done, then SUCCESS, never blocking; the bytes arrive unchanged";
inline constexpr const char* kHostAlloc =
    "device.h host_alloc/host_free: pinned host memory the CPU can use and copy_async can copy";
inline constexpr const char* kIpc =
    "device.h HMC_DEVICE_CAP_IPC: a handle from ipc_export, opened by ipc_open in another process, "
    "maps the same memory (reads see it, writes reach it); ipc_close unmaps";
inline constexpr const char* kDmabuf =
    "device.h HMC_DEVICE_CAP_DMABUF: dmabuf_export gives an fd (owned by the caller) and ptr's "
    "offset inside it";

}  // namespace hmc::check::rule

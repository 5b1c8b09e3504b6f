// The rules of the plugin contract the checker tests, as printed under a failure. Each starts
// with where the rule is written: the section of plugin-contract.md (installed as
// share/hmc/plugin-contract.md; in the source tree sdk/doc/plugin-contract.md).
#pragma once

namespace hmc::check::rule {

// Both kinds.
inline constexpr const char* kLoad =
    "plugin-contract.md 2 (what the loader refuses): the core's loader accepts the plugin: entry "
    "symbol, ABI version, table size, name, required slots, devices that promise only what the "
    "table offers";
inline constexpr const char* kExports =
    "plugin-contract.md 1.1 (one entry symbol): the entry symbol is the only exported symbol "
    "(hmc_add_plugin hides the rest)";
inline constexpr const char* kContexts =
    "plugin-contract.md 1.9 (more than one context): init creates another, independent context "
    "while one is live; finalize releases it and returns HMC_PLUGIN_SUCCESS";
inline constexpr const char* kStructSize =
    "plugin-contract.md 1.2 (struct sizes): a plugin fills only the fields that fit in the "
    "caller's hdr.struct_size";
inline constexpr const char* kDeviceIndex =
    "plugin-contract.md 1.4 (status codes): a device index out of range is refused with an error "
    "status (HMC_PLUGIN_ERR_INVALID_ARGUMENT), never SUCCESS";
inline constexpr const char* kNoDevice =
    "plugin-contract.md 1.4 (status codes): a plugin without devices here says why (net: init "
    "answers HMC_PLUGIN_ERR_NO_DEVICE with a logged reason; device: device_count 0 and "
    "unavailable_reason)";

// Net plugins.
inline constexpr const char* kNetProps =
    "plugin-contract.md 3.10 (device properties): a name, only defined HMC_NET_FLAG_* bits, host "
    "memory in mem_ifaces (every device that moves bytes reaches it)";
inline constexpr const char* kListen =
    "plugin-contract.md 3.3 (connections): a device listens and writes a connection handle of 1 "
    "to HMC_NET_HANDLE_MAX bytes";
inline constexpr const char* kConnect =
    "plugin-contract.md 3.3 (connections): the handle from listen connects; accept and ep_ready "
    "answer IN_PROGRESS until the endpoint is established, then SUCCESS, within HMC_TIMEOUT_MS";
inline constexpr const char* kHello =
    "plugin-contract.md 3.3 (connections): connect_hello and accept_hello are offered together; "
    "connect_hello writes at most *len bytes";
inline constexpr const char* kNoBlock =
    "plugin-contract.md 3.2 (no blocking): no slot blocks; a request ends (test answers done = 1) "
    "within HMC_TIMEOUT_MS, and test answers SUCCESS with done = 0 while it is pending";
inline constexpr const char* kMessages =
    "plugin-contract.md 3.4 (tagged messages): a message arrives whole, with *bytes = its length, "
    "at the receive of exactly its tag";
inline constexpr const char* kOrder =
    "plugin-contract.md 3.4 (tagged messages, ordering): messages of one tag on one endpoint "
    "match receives in the order they were sent";
inline constexpr const char* kUnexpected =
    "plugin-contract.md 3.4 (tagged messages, unexpected): a message that arrived before its "
    "receive was posted is kept, and the receive posted later gets it whole";
inline constexpr const char* kZeroByte =
    "plugin-contract.md 3.4 (tagged messages): zero-byte messages are valid";
inline constexpr const char* kTruncation =
    "plugin-contract.md 3.4 (tagged messages, truncation): a message longer than the receive "
    "buffer ends the receive with HMC_PLUGIN_ERR_TRUNCATED (the send succeeds), and test reports "
    "in *bytes the length that was sent (the bytes delivered only where the transport cannot "
    "know)";
inline constexpr const char* kCancel =
    "plugin-contract.md 3.6 (cancel): a receive not yet matched can be cancelled; test then ends "
    "it with HMC_PLUGIN_ERR_CANCELLED, and it takes no message";
inline constexpr const char* kPeerLost =
    "plugin-contract.md 3.9 (peer loss): when the connection breaks, a pending receive ends with "
    "HMC_PLUGIN_ERR_PEER_LOST, and so do later sends and receives that match nothing";
inline constexpr const char* kKeptAfterLoss =
    "plugin-contract.md 3.9 (peer loss): messages that arrived whole before the connection broke "
    "stay receivable: a receive posted afterwards that matches one ends normally";
inline constexpr const char* kClose =
    "plugin-contract.md 3.3 (connections): close_ep/close_listener release the object (and the "
    "requests still pending on an endpoint) and return HMC_PLUGIN_SUCCESS";
inline constexpr const char* kRegister =
    "plugin-contract.md 3.7 (one-sided): host memory registers with a device that sets "
    "HMC_NET_FLAG_RMA, giving a remote key of 1 to HMC_NET_RKEY_MAX bytes; dereg_mr releases it";
inline constexpr const char* kPutGet =
    "plugin-contract.md 3.5 (completion): put/get completion means the data is in place at the "
    "target (put) or locally (get)";
inline constexpr const char* kBounds =
    "plugin-contract.md 3.7 (one-sided): an access outside the registered region completes with "
    "HMC_PLUGIN_ERR_REMOTE, checked by the owner of the memory before any byte is touched";
inline constexpr const char* kAccess =
    "plugin-contract.md 3.7 (one-sided): a put into memory registered without "
    "HMC_NET_ACCESS_REMOTE_WRITE, or a get from memory registered without "
    "HMC_NET_ACCESS_REMOTE_READ, completes with HMC_PLUGIN_ERR_REMOTE, no byte touched";
inline constexpr const char* kVectored =
    "plugin-contract.md 3.7 (one-sided, vectored): iput_v and iget_v are offered together; each "
    "moves every piece byte-exact as one request that ends when all are in place, zero pieces "
    "end at once, and a list with one piece outside the region ends with HMC_PLUGIN_ERR_REMOTE";
inline constexpr const char* kWakeup =
    "plugin-contract.md 3.8 (progress and sleeping): wait_fd gives an fd >= 0; arm answers "
    "SUCCESS or IN_PROGRESS";
inline constexpr const char* kWakeupPeer =
    "plugin-contract.md 3.8 (progress and sleeping): once arm answered SUCCESS, a message the "
    "peer sends makes wait_fd readable (the core sleeps on it in poll(2))";

// Device plugins.
inline constexpr const char* kDeviceInfo =
    "plugin-contract.md 4.3 (devices): device_info answers SUCCESS for every device, with a name; "
    "ipc_handle_size of 1 to HMC_DEVICE_IPC_HANDLE_MAX bytes when the device sets "
    "HMC_DEVICE_CAP_IPC";
inline constexpr const char* kAlloc =
    "plugin-contract.md 4.4 (memory): device memory that ptr_query reports as owned, on that "
    "device, not host memory, with the allocation's base and size; mem_free releases it";
inline constexpr const char* kForeign =
    "plugin-contract.md 4.4 (memory): ptr_query answers owned = 0 for memory that is not the "
    "plugin's; mem_free refuses it";
inline constexpr const char* kCopy =
    "plugin-contract.md 4.5 (copies): the event answers IN_PROGRESS until the copies before it "
    "are done, then SUCCESS, never blocking; the bytes arrive unchanged";
inline constexpr const char* kReduce =
    "plugin-contract.md 4.5 (copies): reduce enqueues dst = a op b on the stream, completed "
    "through events like a copy, with the core's results (integers exact, floats within "
    "rounding); an unknown dtype or op answers HMC_PLUGIN_ERR_INVALID_ARGUMENT";
inline constexpr const char* kHostAlloc =
    "plugin-contract.md 4.4 (memory): host_alloc gives pinned host memory the CPU can use and "
    "copy_async can copy; host_free releases it";
inline constexpr const char* kIpc =
    "plugin-contract.md 4.6 (capabilities): with HMC_DEVICE_CAP_IPC, a handle from ipc_export, "
    "opened by ipc_open in another process, maps the same memory (reads see it, writes reach "
    "it); ipc_close unmaps";
inline constexpr const char* kDmabuf =
    "plugin-contract.md 4.6 (capabilities): with HMC_DEVICE_CAP_DMABUF, dmabuf_export gives an fd "
    "(owned by the caller) and ptr's offset inside it";

// Ccl plugins.
inline constexpr const char* kCclLibrary =
    "plugin-contract.md 7.1 (the library is dlopened): device_count answers SUCCESS and a count; "
    "a plugin serving devices names the library it opened and its version (library_version)";
inline constexpr const char* kCclId =
    "plugin-contract.md 7.3 (no bootstrap of its own): unique_id writes a fresh id of 1 to "
    "HMC_CCL_UNIQUE_ID_MAX bytes per call";
inline constexpr const char* kCclRefusal =
    "ccl.h (comm_create): INVALID_ARGUMENT for an id of the wrong length, a rank outside "
    "0..nranks-1 or a device the plugin does not serve";
inline constexpr const char* kCclComm =
    "plugin-contract.md 7.3 and 7.5: comm_create of one rank succeeds at once (it waits for no "
    "one); a fresh communicator's comm_async_error is SUCCESS; comm_destroy answers SUCCESS";

}  // namespace hmc::check::rule

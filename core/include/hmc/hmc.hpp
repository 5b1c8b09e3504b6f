// hmc: Heterogeneous Memory Communication. A header-only C++17 wrapper over the C API of hmc.h.
//
// What it adds to hmc.h, and nothing more:
//  - RAII: every handle (context, peer, region, remote, request, memory allocation) is owned by a
//    move-only object whose destructor releases it. Destructors never throw.
//  - Exceptions: a failing call throws hmc::Error, which carries the hmc_status_t and the text of
//    hmc_last_error() captured right after the failing call.
//  - Thin methods that mirror the C functions one to one (hmc_send -> Peer::send, ...).
//
// Lifetimes follow the C API: Peers, Regions, Remotes, Memory and Requests must be destroyed
// before the Context they came from (declare the Context first). Buffers passed to send, recv,
// put and get must stay valid until their Request has ended. Remote handles belong to one Peer
// and must be destroyed before it.
//
// The classes live in an inline namespace so that their symbols can never collide with the
// core's internal types (which also live in namespace hmc); users just write hmc::Context.
#pragma once

#include <hmc/hmc.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hmc {
inline namespace cxx_v0 {

// The exception thrown by every wrapper method that fails. what() reads
// "<call>: <HMC_ERR_...>: <hmc_last_error() text>".
class Error : public std::runtime_error {
 public:
  // Builds the error of the C call `call` that just returned `status`; reads hmc_last_error(),
  // so construct it before making any other hmc call on this thread.
  Error(hmc_status_t status, const std::string& call)
      : std::runtime_error(compose(status, call, hmc_last_error())), status_(status) {}
  // Builds an error whose message is given (for misuse detected by the wrapper itself).
  Error(hmc_status_t status, const std::string& call, const std::string& message)
      : std::runtime_error(compose(status, call, message.c_str())), status_(status) {}

  hmc_status_t status() const noexcept { return status_; }

 private:
  static std::string compose(hmc_status_t status, const std::string& call, const char* detail) {
    std::string m = call + ": " + hmc_status_string(status);
    if (detail != nullptr && *detail != '\0') {
      m += ": ";
      m += detail;
    }
    return m;
  }
  hmc_status_t status_;
};

namespace detail {
inline void check(hmc_status_t status, const char* call) {
  if (status != HMC_SUCCESS) throw Error(status, call);
}
template <typename T>
T sized() {
  T v{};
  v.struct_size = sizeof(T);
  return v;
}
}  // namespace detail

// Library version text ("0.1.0").
inline std::string version() {
  return hmc_version();
}
// Fixed name of a status ("HMC_ERR_TIMEOUT").
inline std::string status_string(hmc_status_t status) {
  return hmc_status_string(status);
}

// A non-blocking operation in flight (send, recv, put, get). wait()/test() end it; once ended
// (successfully or not) the object is empty. Destroying a pending Request cancels it and waits
// for it to end (up to the context's default timeout), so that the buffer it uses is no longer
// touched afterwards.
class Request {
 public:
  Request() noexcept = default;
  // Takes ownership of a C request handle.
  explicit Request(hmc_request_t req) noexcept : req_(req) {}
  Request(Request&& o) noexcept : req_(std::exchange(o.req_, nullptr)) {}
  Request& operator=(Request&& o) noexcept {
    if (this != &o) {
      abandon();
      req_ = std::exchange(o.req_, nullptr);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { abandon(); }

  // True while the request has not ended.
  bool pending() const noexcept { return req_ != nullptr; }
  explicit operator bool() const noexcept { return pending(); }
  hmc_request_t get() const noexcept { return req_; }
  // Gives up ownership; the caller must end the request with hmc_request_test/wait.
  hmc_request_t release() noexcept { return std::exchange(req_, nullptr); }

  // Waits up to timeout_ms (-1: the context's default) and returns the bytes received or moved.
  // Throws Error; with HMC_ERR_TIMEOUT the request is still pending and may be waited again.
  size_t wait(int timeout_ms = -1) {
    size_t bytes = 0;
    hmc_status_t s = wait_status(timeout_ms, &bytes);
    if (s != HMC_SUCCESS) throw Error(s, "hmc_request_wait");
    return bytes;
  }
  // Like wait() but returns the status instead of throwing (HMC_ERR_TIMEOUT: still pending).
  hmc_status_t wait_status(int timeout_ms, size_t* bytes = nullptr) noexcept {
    if (req_ == nullptr) return HMC_ERR_INVALID_HANDLE;
    hmc_status_t s = hmc_request_wait(req_, timeout_ms, bytes);
    if (s == HMC_IN_PROGRESS) s = HMC_ERR_TIMEOUT;
    if (s != HMC_ERR_TIMEOUT) req_ = nullptr;  // any other status is final and released it
    return s;
  }
  // Checks without waiting: the bytes when the request ended successfully, nullopt while it
  // runs. Throws Error when it ended with an error.
  std::optional<size_t> test() {
    if (req_ == nullptr)
      throw Error(HMC_ERR_INVALID_HANDLE, "hmc_request_test", "empty hmc::Request");
    size_t bytes = 0;
    hmc_status_t s = hmc_request_test(req_, &bytes);
    if (s == HMC_IN_PROGRESS || s == HMC_ERR_TIMEOUT) return std::nullopt;
    req_ = nullptr;
    detail::check(s, "hmc_request_test");
    return bytes;
  }
  // Asks to cancel: true when the request will end with HMC_ERR_CANCELLED, false when it is too
  // late and it will end normally. Either way wait()/test() must still end it.
  bool cancel() {
    if (req_ == nullptr)
      throw Error(HMC_ERR_INVALID_HANDLE, "hmc_request_cancel", "empty hmc::Request");
    hmc_status_t s = hmc_request_cancel(req_);
    if (s == HMC_ERR_NOT_SUPPORTED) return false;
    detail::check(s, "hmc_request_cancel");
    return true;
  }

 private:
  void abandon() noexcept {
    if (req_ == nullptr) return;
    (void)hmc_request_cancel(req_);
    // If even this wait times out the handle is leaked: releasing the memory under a request
    // the core still runs would be worse.
    (void)hmc_request_wait(req_, -1, nullptr);
    req_ = nullptr;
  }
  hmc_request_t req_ = nullptr;
};

// A registration of local memory for one-sided access by peers (hmc_mem_register). The memory
// itself stays owned by the caller and must outlive the Region.
class Region {
 public:
  Region() noexcept = default;
  explicit Region(hmc_region_t region) noexcept : region_(region) {}
  Region(Region&& o) noexcept : region_(std::exchange(o.region_, nullptr)) {}
  Region& operator=(Region&& o) noexcept {
    if (this != &o) {
      reset();
      region_ = std::exchange(o.region_, nullptr);
    }
    return *this;
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() { reset(); }

  hmc_region_t get() const noexcept { return region_; }
  explicit operator bool() const noexcept { return region_ != nullptr; }
  hmc_region_t release() noexcept { return std::exchange(region_, nullptr); }
  // Deregisters now (later remote accesses are refused).
  void reset() noexcept {
    if (region_ != nullptr) (void)hmc_mem_deregister(std::exchange(region_, nullptr));
  }

  // The packed remote descriptor, to be handed to peers by any means.
  std::vector<uint8_t> pack() const {
    std::vector<uint8_t> buf(256);
    for (int attempt = 0; attempt < 2; ++attempt) {
      size_t len = buf.size();
      hmc_status_t s = hmc_region_pack(region_, buf.data(), &len);
      if (s == HMC_SUCCESS) {
        buf.resize(len);
        return buf;
      }
      // Too small: len holds the size needed.
      if (s == HMC_ERR_INVALID_ARGUMENT && len > buf.size()) {
        buf.resize(len);
        continue;
      }
      throw Error(s, "hmc_region_pack");
    }
    throw Error(HMC_ERR_INTERNAL, "hmc_region_pack", "descriptor size changed between calls");
  }

 private:
  hmc_region_t region_ = nullptr;
};

// A peer's region, imported from its packed descriptor: the target of put/get towards that peer.
class Remote {
 public:
  Remote() noexcept = default;
  explicit Remote(hmc_remote_t remote) noexcept : remote_(remote) {}
  Remote(Remote&& o) noexcept : remote_(std::exchange(o.remote_, nullptr)) {}
  Remote& operator=(Remote&& o) noexcept {
    if (this != &o) {
      reset();
      remote_ = std::exchange(o.remote_, nullptr);
    }
    return *this;
  }
  Remote(const Remote&) = delete;
  Remote& operator=(const Remote&) = delete;
  ~Remote() { reset(); }

  hmc_remote_t get() const noexcept { return remote_; }
  explicit operator bool() const noexcept { return remote_ != nullptr; }
  hmc_remote_t release() noexcept { return std::exchange(remote_, nullptr); }
  void reset() noexcept {
    if (remote_ != nullptr) (void)hmc_remote_release(std::exchange(remote_, nullptr));
  }
  // Size of the remote region in bytes.
  uint64_t size() const {
    uint64_t n = 0;
    detail::check(hmc_remote_size(remote_, &n), "hmc_remote_size");
    return n;
  }

 private:
  hmc_remote_t remote_ = nullptr;
};

// A transfer list (hmc_xfer_prepare): ranges between a local Region and a Remote, posted as
// one request as often as wanted. Both regions must outlive the list.
class XferList {
 public:
  XferList() noexcept = default;
  XferList(const Region& local, const Remote& remote, hmc_xfer_op_t op,
           const std::vector<hmc_xfer_desc_t>& descs) {
    detail::check(
        hmc_xfer_prepare(local.get(), remote.get(), op, descs.data(), descs.size(), &list_),
        "hmc_xfer_prepare");
  }
  XferList(XferList&& o) noexcept : list_(std::exchange(o.list_, nullptr)) {}
  XferList& operator=(XferList&& o) noexcept {
    if (this != &o) {
      reset();
      list_ = std::exchange(o.list_, nullptr);
    }
    return *this;
  }
  XferList(const XferList&) = delete;
  XferList& operator=(const XferList&) = delete;
  ~XferList() { reset(); }

  hmc_xfer_list_t get() const noexcept { return list_; }
  explicit operator bool() const noexcept { return list_ != nullptr; }
  void reset() noexcept {
    if (list_ != nullptr) (void)hmc_xfer_release(std::exchange(list_, nullptr));
  }
  // flags: HMC_XFER_NOTIFY to have notify_value delivered to the target after the last byte.
  Request post(uint32_t flags = 0, uint64_t notify_value = 0) {
    hmc_request_t r = nullptr;
    detail::check(hmc_xfer_post(list_, flags, notify_value, &r), "hmc_xfer_post");
    return Request(r);
  }
  // The same with a notification that carries bytes too (at most HMC_NOTIFY_MAX_BYTES).
  Request post_notify(uint64_t notify_value, const void* bytes, size_t size) {
    hmc_request_t r = nullptr;
    const hmc_notify_msg_t n{notify_value, bytes, size};
    detail::check(hmc_xfer_post_notify(list_, &n, &r), "hmc_xfer_post_notify");
    return Request(r);
  }

 private:
  hmc_xfer_list_t list_ = nullptr;
};

// A connected peer. Transfers are non-blocking and return a Request; buffers must stay valid
// until it ends. Closing (or destroying) the Peer cancels its pending requests.
class Peer {
 public:
  Peer() noexcept = default;
  explicit Peer(hmc_peer_t peer) noexcept : peer_(peer) {}
  Peer(Peer&& o) noexcept : peer_(std::exchange(o.peer_, nullptr)) {}
  Peer& operator=(Peer&& o) noexcept {
    if (this != &o) {
      close();
      peer_ = std::exchange(o.peer_, nullptr);
    }
    return *this;
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  ~Peer() { close(); }

  hmc_peer_t get() const noexcept { return peer_; }
  explicit operator bool() const noexcept { return peer_ != nullptr; }
  hmc_peer_t release() noexcept { return std::exchange(peer_, nullptr); }
  void close() noexcept {
    if (peer_ != nullptr) (void)hmc_peer_close(std::exchange(peer_, nullptr));
  }

  // The chosen path and what is known about the peer.
  hmc_peer_info_t info() const {
    auto info = detail::sized<hmc_peer_info_t>();
    detail::check(hmc_peer_info(peer_, &info), "hmc_peer_info");
    return info;
  }

  Request send(const void* buf, size_t size, uint64_t tag) {
    hmc_request_t r = nullptr;
    detail::check(hmc_send(peer_, buf, size, tag, &r), "hmc_send");
    return Request(r);
  }
  Request recv(void* buf, size_t size, uint64_t tag) {
    hmc_request_t r = nullptr;
    detail::check(hmc_recv(peer_, buf, size, tag, &r), "hmc_recv");
    return Request(r);
  }
  // flags: HMC_PUT_NOTIFY delivers notify_value to the target once the data landed.
  Request put(const void* buf, size_t size, const Remote& remote, uint64_t remote_offset,
              uint32_t flags = 0, uint64_t notify_value = 0) {
    hmc_request_t r = nullptr;
    detail::check(hmc_put(peer_, buf, size, remote.get(), remote_offset, flags, notify_value, &r),
                  "hmc_put");
    return Request(r);
  }
  // A put whose notification carries bytes too (at most HMC_NOTIFY_MAX_BYTES).
  Request put_notify(const void* buf, size_t size, const Remote& remote, uint64_t remote_offset,
                     uint64_t notify_value, const void* bytes, size_t bytes_size) {
    hmc_request_t r = nullptr;
    const hmc_notify_msg_t n{notify_value, bytes, bytes_size};
    detail::check(hmc_put_notify(peer_, buf, size, remote.get(), remote_offset, &n, &r),
                  "hmc_put_notify");
    return Request(r);
  }
  // A notification without data, after those of the earlier notifying puts and lists.
  Request notify(uint64_t value, const void* bytes = nullptr, size_t size = 0) {
    hmc_request_t r = nullptr;
    const hmc_notify_msg_t n{value, bytes, size};
    detail::check(hmc_notify_send(peer_, &n, &r), "hmc_notify_send");
    return Request(r);
  }
  Request get(void* buf, size_t size, const Remote& remote, uint64_t remote_offset) {
    hmc_request_t r = nullptr;
    detail::check(hmc_get(peer_, buf, size, remote.get(), remote_offset, &r), "hmc_get");
    return Request(r);
  }
  // Imports the peer's packed region descriptor.
  Remote import_remote(const void* desc, size_t len) {
    hmc_remote_t r = nullptr;
    detail::check(hmc_remote_import(peer_, desc, len, &r), "hmc_remote_import");
    return Remote(r);
  }
  Remote import_remote(const std::vector<uint8_t>& desc) {
    return import_remote(desc.data(), desc.size());
  }

 private:
  hmc_peer_t peer_ = nullptr;
};

// Memory from hmc_mem_alloc on a named device ("host", "cuda:0"), freed by the destructor.
class Memory {
 public:
  Memory() noexcept = default;
  Memory(hmc_context_t ctx, const std::string& device, size_t size) : ctx_(ctx), size_(size) {
    detail::check(hmc_mem_alloc(ctx, device.c_str(), size, &ptr_), "hmc_mem_alloc");
  }
  Memory(Memory&& o) noexcept
      : ctx_(std::exchange(o.ctx_, nullptr)),
        ptr_(std::exchange(o.ptr_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  Memory& operator=(Memory&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::exchange(o.ctx_, nullptr);
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  ~Memory() { reset(); }

  void* data() const noexcept { return ptr_; }
  size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  void reset() noexcept {
    if (ptr_ != nullptr) (void)hmc_mem_free(ctx_, std::exchange(ptr_, nullptr));
    size_ = 0;
  }

 private:
  hmc_context_t ctx_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Options of Context; the defaults defer to the HMC_ environment.
struct ContextOptions {
  int progress_thread = -1;  // 1 on, 0 off, -1 HMC_PROGRESS_THREAD
  std::string listen_host;   // "": HMC_LISTEN_HOST
  uint16_t listen_port = 0;  // 0: HMC_LISTEN_PORT
};

// An hmc context: plugins, devices, the control plane and (by default) a progress thread.
class Context {
 public:
  Context() : Context(ContextOptions{}) {}
  explicit Context(const ContextOptions& options) {
    auto o = detail::sized<hmc_context_options_t>();
    o.progress_thread = options.progress_thread;
    o.listen_host = options.listen_host.empty() ? nullptr : options.listen_host.c_str();
    o.listen_port = options.listen_port;
    detail::check(hmc_context_create(&o, &ctx_), "hmc_context_create");
  }
  // Takes ownership of a C context handle.
  explicit Context(hmc_context_t ctx) noexcept : ctx_(ctx) {}
  Context(Context&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
  Context& operator=(Context&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { reset(); }

  hmc_context_t get() const noexcept { return ctx_; }
  explicit operator bool() const noexcept { return ctx_ != nullptr; }
  hmc_context_t release() noexcept { return std::exchange(ctx_, nullptr); }
  void reset() noexcept {
    if (ctx_ != nullptr) (void)hmc_context_destroy(std::exchange(ctx_, nullptr));
  }

  // Drives progress once (only needed with the progress thread off).
  void progress() { detail::check(hmc_progress(ctx_), "hmc_progress"); }
  // The descriptor an event loop watches, and its re-arming (hmc_context_event_fd in hmc.h).
  int event_fd() const {
    int fd = -1;
    detail::check(hmc_context_event_fd(ctx_, &fd), "hmc_context_event_fd");
    return fd;
  }
  void event_clear() { detail::check(hmc_context_event_clear(ctx_), "hmc_context_event_clear"); }

  // Every plugin found, loaded or skipped, in search order.
  std::vector<hmc_plugin_info_t> plugins() const {
    return list<hmc_plugin_info_t>(hmc_plugin_count, "hmc_plugin_count", hmc_plugin_info,
                                   "hmc_plugin_info");
  }
  std::vector<hmc_device_info_t> devices() const {
    return list<hmc_device_info_t>(hmc_device_count, "hmc_device_count", hmc_device_info,
                                   "hmc_device_info");
  }
  std::vector<hmc_net_device_info_t> net_devices() const {
    return list<hmc_net_device_info_t>(hmc_net_device_count, "hmc_net_device_count",
                                       hmc_net_device_info, "hmc_net_device_info");
  }
  // Every HMC_ variable known to the core and the loaded plugins, with value and default.
  std::vector<hmc_config_entry_t> config() const {
    return list<hmc_config_entry_t>(hmc_config_count, "hmc_config_count", hmc_config_entry,
                                    "hmc_config_entry");
  }

  // This context's address blob, for peers to connect to.
  std::vector<uint8_t> address() const {
    std::vector<uint8_t> buf(HMC_ADDRESS_MAX);
    size_t len = buf.size();
    detail::check(hmc_address(ctx_, buf.data(), &len), "hmc_address");
    buf.resize(len);
    return buf;
  }
  // The address blob of the context listening at "host:port".
  static std::vector<uint8_t> address_from_host(const std::string& host_port) {
    std::vector<uint8_t> buf(HMC_ADDRESS_MAX);
    size_t len = buf.size();
    detail::check(hmc_address_from_host(host_port.c_str(), buf.data(), &len),
                  "hmc_address_from_host");
    buf.resize(len);
    return buf;
  }

  Peer connect(const void* addr, size_t len, int timeout_ms = -1) {
    hmc_peer_t p = nullptr;
    detail::check(hmc_connect(ctx_, addr, len, timeout_ms, &p), "hmc_connect");
    return Peer(p);
  }
  Peer connect(const std::vector<uint8_t>& addr, int timeout_ms = -1) {
    return connect(addr.data(), addr.size(), timeout_ms);
  }
  // The first incoming peer whose setup finished; throws Error(HMC_ERR_TIMEOUT) when none did in
  // time. Connectors that failed never come out of it: accept_stats() counts them.
  Peer accept(int timeout_ms = -1) {
    hmc_peer_t p = nullptr;
    detail::check(hmc_accept(ctx_, timeout_ms, &p), "hmc_accept");
    return Peer(p);
  }
  hmc_accept_stats_t accept_stats() const {
    auto s = detail::sized<hmc_accept_stats_t>();
    detail::check(hmc_accept_stats(ctx_, &s), "hmc_accept_stats");
    return s;
  }

  Memory alloc(const std::string& device, size_t size) { return Memory(ctx_, device, size); }
  // Blocking copy between any two local memories.
  void copy(void* dst, const void* src, size_t size) {
    detail::check(hmc_mem_copy(ctx_, dst, src, size), "hmc_mem_copy");
  }
  // access: HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE.
  Region register_memory(void* addr, size_t size, uint32_t access) {
    hmc_region_t r = nullptr;
    detail::check(hmc_mem_register(ctx_, addr, size, access, &r), "hmc_mem_register");
    return Region(r);
  }

  // The oldest put notification; throws Error(HMC_ERR_TIMEOUT) when none came in time, and
  // Error(HMC_ERR_TRUNCATED) for one that carries bytes (take it with notify_wait_msg).
  hmc_notification_t notify_wait(int timeout_ms = -1) {
    hmc_notification_t n{};
    detail::check(hmc_notify_wait(ctx_, timeout_ms, &n), "hmc_notify_wait");
    return n;
  }
  // The oldest notification and the bytes it carries (*bytes; empty for a value-only one).
  hmc_notification_t notify_wait_msg(std::string* bytes, int timeout_ms = -1) {
    hmc_notification_t n{};
    bytes->resize(HMC_NOTIFY_MAX_BYTES);
    size_t size = 0;
    detail::check(hmc_notify_wait_msg(ctx_, timeout_ms, &n, &(*bytes)[0], bytes->size(), &size),
                  "hmc_notify_wait_msg");
    bytes->resize(size);
    return n;
  }

 private:
  template <typename T, typename CountFn, typename InfoFn>
  std::vector<T> list(CountFn count_fn, const char* count_call, InfoFn info_fn,
                      const char* info_call) const {
    int n = 0;
    detail::check(count_fn(ctx_, &n), count_call);
    std::vector<T> out;
    out.reserve(n > 0 ? static_cast<size_t>(n) : 0);
    for (int i = 0; i < n; ++i) {
      auto v = detail::sized<T>();
      detail::check(info_fn(ctx_, i, &v), info_call);
      out.push_back(v);
    }
    return out;
  }
  hmc_context_t ctx_ = nullptr;
};

// A communicator (docs/collectives.md). Destroy it before its Context. Collectives return a
// Request like transfers; their buffers must stay valid until it ended.
class Comm {
 public:
  Comm() noexcept = default;
  // Joins the group: rank, size and rendezvous from the arguments where given (rank >= 0,
  // size > 0, rendezvous not empty), else from the environment (hmc_comm_create).
  explicit Comm(const Context& ctx, int rank = -1, int size = 0, const std::string& rendezvous = "",
                int timeout_ms = -1) {
    auto o = detail::sized<hmc_comm_options_t>();
    o.rank = rank;
    o.size = size;
    o.rendezvous = rendezvous.empty() ? nullptr : rendezvous.c_str();
    o.timeout_ms = timeout_ms;
    detail::check(hmc_comm_create(ctx.get(), &o, &comm_), "hmc_comm_create");
  }
  explicit Comm(hmc_comm_t comm) noexcept : comm_(comm) {}
  Comm(Comm&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Comm& operator=(Comm&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() { reset(); }

  hmc_comm_t get() const noexcept { return comm_; }
  explicit operator bool() const noexcept { return comm_ != nullptr; }
  void reset() noexcept {
    if (comm_ != nullptr) (void)hmc_comm_destroy(std::exchange(comm_, nullptr));
  }
  int rank() const {
    int r = 0;
    detail::check(hmc_comm_rank(comm_, &r), "hmc_comm_rank");
    return r;
  }
  int size() const {
    int n = 0;
    detail::check(hmc_comm_size(comm_, &n), "hmc_comm_size");
    return n;
  }
  // Where rank `rank` runs (host, pid, vendor).
  hmc_comm_member_info_t member(int rank) const {
    auto m = detail::sized<hmc_comm_member_info_t>();
    detail::check(hmc_comm_member_info(comm_, rank, &m), "hmc_comm_member_info");
    return m;
  }
  // An empty Comm for a negative color.
  Comm split(int color, int key) {
    hmc_comm_t out = nullptr;
    detail::check(hmc_comm_split(comm_, color, key, &out), "hmc_comm_split");
    return Comm(out);
  }

  // Each collective takes the application's stream (hmc.h, hmc_*_on_stream); nullptr: none.
  Request barrier(void* stream = nullptr) {
    if (stream)
      return post([&](hmc_request_t* r) { return hmc_barrier_on_stream(comm_, stream, r); },
                  "hmc_barrier_on_stream");
    return post([&](hmc_request_t* r) { return hmc_barrier(comm_, r); }, "hmc_barrier");
  }
  Request broadcast(void* buf, size_t count, hmc_dtype_t dtype, int root, void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_broadcast_on_stream(comm_, buf, count, dtype, root, stream, r);
          },
          "hmc_broadcast_on_stream");
    return post([&](hmc_request_t* r) { return hmc_broadcast(comm_, buf, count, dtype, root, r); },
                "hmc_broadcast");
  }
  Request all_gather(const void* send, void* recv, size_t count, hmc_dtype_t dtype,
                     void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_all_gather_on_stream(comm_, send, recv, count, dtype, stream, r);
          },
          "hmc_all_gather_on_stream");
    return post(
        [&](hmc_request_t* r) { return hmc_all_gather(comm_, send, recv, count, dtype, r); },
        "hmc_all_gather");
  }
  Request all_to_all(const void* send, void* recv, size_t count, hmc_dtype_t dtype,
                     void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_all_to_all_on_stream(comm_, send, recv, count, dtype, stream, r);
          },
          "hmc_all_to_all_on_stream");
    return post(
        [&](hmc_request_t* r) { return hmc_all_to_all(comm_, send, recv, count, dtype, r); },
        "hmc_all_to_all");
  }
  Request all_to_allv(const void* send, const size_t* send_counts, const size_t* send_displs,
                      void* recv, const size_t* recv_counts, const size_t* recv_displs,
                      hmc_dtype_t dtype, void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_all_to_allv_on_stream(comm_, send, send_counts, send_displs, recv,
                                             recv_counts, recv_displs, dtype, stream, r);
          },
          "hmc_all_to_allv_on_stream");
    return post(
        [&](hmc_request_t* r) {
          return hmc_all_to_allv(comm_, send, send_counts, send_displs, recv, recv_counts,
                                 recv_displs, dtype, r);
        },
        "hmc_all_to_allv");
  }
  Request reduce_scatter(const void* send, void* recv, size_t count, hmc_dtype_t dtype,
                         hmc_reduce_op_t op, void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_reduce_scatter_on_stream(comm_, send, recv, count, dtype, op, stream, r);
          },
          "hmc_reduce_scatter_on_stream");
    return post(
        [&](hmc_request_t* r) {
          return hmc_reduce_scatter(comm_, send, recv, count, dtype, op, r);
        },
        "hmc_reduce_scatter");
  }
  Request all_reduce(const void* send, void* recv, size_t count, hmc_dtype_t dtype,
                     hmc_reduce_op_t op, void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_all_reduce_on_stream(comm_, send, recv, count, dtype, op, stream, r);
          },
          "hmc_all_reduce_on_stream");
    return post(
        [&](hmc_request_t* r) { return hmc_all_reduce(comm_, send, recv, count, dtype, op, r); },
        "hmc_all_reduce");
  }
  // recv is read on root only (nullptr elsewhere is fine).
  Request reduce(const void* send, void* recv, size_t count, hmc_dtype_t dtype, hmc_reduce_op_t op,
                 int root, void* stream = nullptr) {
    if (stream)
      return post(
          [&](hmc_request_t* r) {
            return hmc_reduce_on_stream(comm_, send, recv, count, dtype, op, root, stream, r);
          },
          "hmc_reduce_on_stream");
    return post(
        [&](hmc_request_t* r) { return hmc_reduce(comm_, send, recv, count, dtype, op, root, r); },
        "hmc_reduce");
  }

 private:
  template <typename Fn>
  Request post(Fn fn, const char* call) {
    hmc_request_t r = nullptr;
    detail::check(fn(&r), call);
    return Request(r);
  }
  hmc_comm_t comm_ = nullptr;
};

}  // namespace cxx_v0
}  // namespace hmc

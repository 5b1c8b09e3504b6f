// One connection to a peer (hmc_net_ep_t): a UCP endpoint for sending and one-sided operations,
// and an rx id under which the peer's messages arrive on the shared worker (tags.h).
//
// Setup (wire.h): the connector creates its UCP endpoint from the worker address in the
// listener's handle and sends a hello carrying its own worker address, rx id and the handle's
// nonce; the listener creates its endpoint back from that address and answers welcome. Each
// side then posts a receive for the peer's bye, and watches a same-host peer process
// (identity.h). Failure (UCX error callback, bye, peer process gone, setup timeout) ends every
// pending request with PEER_LOST.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hmc/plugin/net.h"
#include "identity.h"
#include "region.h"
#include "request.h"
#include "tags.h"
#include "wire.h"

namespace hmc::ucx {

class Context;

class Endpoint {
 public:
  // Connector side: starts connecting to the listener described by h.
  static hmc_plugin_status_t connect(Context& ctx, const wire::Handle& h, Endpoint** out);
  // Listener side: the endpoint for the connector whose hello is h; it takes over rx_id.
  // *welcome is the answer's send: the listener hands the endpoint out once it is sent.
  static hmc_plugin_status_t accept(Context& ctx, uint16_t rx_id, const wire::Hello& h,
                                    Endpoint** out, Request** welcome);
  // close_ep: sends bye (when established), abandons every pending request, closes the UCP
  // endpoint without waiting for the peer, returns the rx id.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  Context& ctx() const { return ctx_; }
  // ep_ready: SUCCESS once established, IN_PROGRESS before, PEER_LOST once failed.
  hmc_plugin_status_t ready_status();
  // connect_hello (net.h): the connector's hello, for the core to carry to the listener, in
  // place of sending it over UCX (which the context's next progress pass does otherwise): the
  // listener then makes its endpoint before any message arrives on its interfaces, and UCX
  // polls the interface that carries the data last, as for an endpoint made from an exchanged
  // address. *len: room on entry, bytes written on return (0: it was sent over UCX already).
  hmc_plugin_status_t take_hello(uint8_t* out, size_t* len);
  bool failed() const { return state_ == State::kFailed; }
  ucp_ep_h uep() const { return uep_; }

  hmc_plugin_status_t post_send(const void* buf, size_t len, uint64_t tag, Request** out);
  hmc_plugin_status_t post_recv(void* buf, size_t len, uint64_t tag, Request** out);
  hmc_plugin_status_t post_put(const void* buf, size_t len, uint64_t addr, RemoteKey* k,
                               Request** out);
  hmc_plugin_status_t post_get(void* buf, size_t len, uint64_t addr, RemoteKey* k, Request** out);
  // Vectored put/get: every piece checked against the key first (one refused piece refuses the
  // request, nothing moves), then posted without a request of its own; one flush of the
  // endpoint is the request's completion.
  hmc_plugin_status_t post_vec(bool put, const hmc_net_iov_t* iov, size_t count, RemoteKey* k,
                               Request** out);
  hmc_plugin_status_t cancel(Request* r);

  // Remote keys unpacked on this endpoint (their UCX keys go before the UCP endpoint does).
  hmc_plugin_status_t unpack_rkey(const void* blob, size_t len, RemoteKey** out);
  void forget_rkey(RemoteKey* k);

  // Pending-list bookkeeping for Context::finish/abandon.
  void link(Request* r);
  void unlink(Request* r);

  // Context: a failure to act on after the current UCX call (see Context::attend).
  void schedule_failure(const std::string& reason);
  // Context: deferred work (a scheduled failure, an arrived bye).
  void service();
  // Context: the watched peer process is gone.
  bool watching() const { return watch_.active(); }
  const ProcessWatch& watch() const { return watch_; }
  uint32_t peer_pid() const { return peer_.pid; }
  bool in_attention = false;

 private:
  enum class State : uint8_t { kConnecting, kReady, kFailed };

  explicit Endpoint(Context& ctx) : ctx_(ctx) {}
  hmc_plugin_status_t create_uep(const uint8_t* address);
  void established(const ProcessIdentity& peer);
  void fail(const std::string& reason);
  void drop_control(Request** r);
  void release_ucx_rkeys();
  void post_bye_recv();
  void post_welcome_recv();
  hmc_plugin_status_t usable(const char* what) const;
  hmc_plugin_status_t post_error(Request* r, ucs_status_t us, const char* what);
  // Ends a one-sided operation at once with REMOTE (logged at debug level).
  hmc_plugin_status_t refuse(ReqKind kind, size_t len, uint64_t addr, const RemoteKey& k,
                             const char* why, Request** out);
  static void on_bye(Request* r);

  Context& ctx_;
  State state_ = State::kConnecting;
  ucp_ep_h uep_ = nullptr;
  uint16_t rx_id_ = 0;    // our id: the peer's messages to us carry it
  uint16_t peer_id_ = 0;  // the peer's id: our messages carry it
  uint64_t nonce_ = 0;
  uint64_t deadline_ns_ = 0;  // connector: when setup gives up
  ProcessIdentity peer_;
  ProcessWatch watch_;
  Request* pending_ = nullptr;         // user requests with UCX operations outstanding
  Request* hello_ = nullptr;           // connector: the hello send
  std::vector<uint8_t> unsent_hello_;  // connector: the hello until it is sent or handed over
  Request* welcome_ = nullptr;         // connector: the receive for the listener's welcome
  Request* bye_ = nullptr;             // the receive for the peer's bye
  bool bye_arrived_ = false;
  std::string failure_;    // scheduled failure, until service() acts on it
  std::string peer_name_;  // "pid 123" or "listener 5", for log messages
  std::vector<RemoteKey*> rkeys_;
};

}  // namespace hmc::ucx

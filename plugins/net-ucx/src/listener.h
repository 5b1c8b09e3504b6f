// A listener (hmc_net_listener_t): one connection handle, one expected connector. The handle
// names the worker address, an rx id reserved for the coming endpoint, and a random nonce; the
// hello receive is posted under that id until a connector presents the nonce.
#pragma once

#include <cstdint>
#include <string>

#include "hmc/plugin/net.h"
#include "request.h"
#include "wire.h"

namespace hmc::ucx {

class Context;
class Endpoint;

class Listener {
 public:
  static hmc_plugin_status_t create(Context& ctx, void* handle, size_t* handle_len, Listener** out);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // SUCCESS with *out once a connector's valid hello arrived and the answer to it left (so the
  // connector completes its setup without further progress on this side), IN_PROGRESS before,
  // PEER_LOST when the answer could not be sent, INVALID_ARGUMENT after the endpoint was
  // already handed out.
  hmc_plugin_status_t accept(Endpoint** out);
  // accept_hello (net.h): the connector's hello, carried by the core instead of over UCX. Makes
  // the endpoint (accept hands it out once its answer left); INVALID_ARGUMENT for a hello that
  // is malformed or not for this listener, or when an endpoint was made already.
  hmc_plugin_status_t take_hello(const uint8_t* bytes, size_t len);

 private:
  explicit Listener(Context& ctx) : ctx_(ctx) {}
  bool post_hello();
  // Withdraws the receive posted for a hello over UCX.
  void drop_hello_recv();
  // Decodes a connector's hello into *hello and checks it names this listener: the reason it
  // is refused, or empty.
  std::string check_hello(const uint8_t* bytes, size_t len, wire::Hello* hello) const;
  // Makes the endpoint for a hello that passed the checks (takes the rx id over).
  hmc_plugin_status_t answer(const wire::Hello& hello);
  hmc_plugin_status_t finish_accept(Endpoint** out);

  Context& ctx_;
  uint16_t id_ = 0;
  uint64_t nonce_ = 0;
  Request* hello_ = nullptr;
  Endpoint* pending_ = nullptr;  // made from a valid hello, answer not sent yet
  Request* welcome_ = nullptr;   // that answer's send
  uint64_t deadline_ns_ = 0;     // for sending it
  bool handed_out_ = false;      // the rx id now belongs to an endpoint
};

}  // namespace hmc::ucx

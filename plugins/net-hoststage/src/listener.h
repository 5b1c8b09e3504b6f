// A listening endpoint for ONE incoming peer (hmc_net_listener_t). tcp: one listening socket per
// address; shm: one abstract Unix socket. Incoming streams must present the handle's nonce in
// their hello; others are closed. Once every stream of one connector arrived the endpoint is
// assembled, accepted (the accept hello goes out), and handed out by the next accept call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "handle.h"
#include "hmc/plugin/common.h"
#include "util.h"
#include "wire.h"

namespace hmc::hoststage {

// How long a listening socket goes unwatched after accept4 ran out of descriptors or memory.
constexpr uint64_t kAcceptPauseNs = 100ull * 1000000;

class Context;
class Endpoint;

class Listener {
 public:
  static hmc_plugin_status_t create(Context& ctx, DevKind dev, void* handle, size_t* handle_len,
                                    Listener** out);
  ~Listener();  // closes sockets; an assembled endpoint not yet accepted is closed too
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // SUCCESS with *out once the peer connected, IN_PROGRESS before.
  hmc_plugin_status_t accept(Endpoint** out);
  // Still waiting for its peer (its sockets need polling on every progress call).
  bool waiting() const { return ready_ == nullptr && !handed_out_; }

  void on_listen_event(int index);
  void on_incoming_event(void* incoming);
  void check_deadlines(uint64_t now_ns);

 private:
  struct Incoming {
    Fd fd;
    uint64_t token = 0;
    Hello hello{};
    size_t got = 0;
    std::vector<Fd> fds;  // shm: ring memfd and the connector's wake eventfd
    uint64_t deadline_ns = 0;
  };
  struct ListenSock {
    Fd fd;
    uint64_t token = 0;
    bool paused = false;  // not watched: accept4 ran out of descriptors (or memory)
  };

  Listener(Context& ctx, DevKind dev) : ctx_(ctx), dev_(dev) {}
  hmc_plugin_status_t open_tcp(ConnHandle* h);
  hmc_plugin_status_t open_shm(ConnHandle* h);
  void drop(Incoming* in, const char* why);
  bool verify(Incoming* in);
  void assemble();
  void close_sockets();

  Context& ctx_;
  DevKind dev_;
  uint64_t nonce_ = 0;
  std::vector<ListenSock> socks_;
  uint64_t resume_ns_ = 0;  // when the paused sockets are watched again (0: none paused)
  bool warned_ = false;     // the pause was logged
  std::vector<std::unique_ptr<Incoming>> incoming_;
  std::vector<Incoming*> by_stream_;  // verified streams of the one connector, by index
  uint16_t nstreams_ = 0;
  std::unique_ptr<Endpoint> ready_;
  bool handed_out_ = false;
};

}  // namespace hmc::hoststage
